"""VLLMService, serving.vllmop.io/v1alpha1: the resource and every model it is made of."""

from __future__ import annotations

import re
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from vllm_operator.api import rules
from vllm_operator.api.spec import (
    AutoscalingSpec,
    AutotuneBounds,
    AutotuneSpec,
    Bound,
    Budgets,
    CompileCacheSpec,
    EngineSpec,
    EnvVar,
    GPUSpec,
    ModelCacheSpec,
    MonitoringSpec,
    QueueBudgets,
    RunningBudgets,
    SecretKeySelector,
    SLOSpec,
    TokenBudgets,
    VLLMServiceSpec,
    raise_broken,
)
from vllm_operator.api.status import (
    BudgetValues,
    Condition,
    EffectiveStatus,
    GPUStatus,
    MetricsStatus,
    TuningDecisionRecord,
    TuningStatus,
    VLLMServiceStatus,
    WindowSample,
)
from vllm_operator.constants import API_VERSION, KIND

_DNS1123_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")

__all__ = [
    "AutoscalingSpec",
    "AutotuneBounds",
    "AutotuneSpec",
    "Bound",
    "BudgetValues",
    "Budgets",
    "CompileCacheSpec",
    "Condition",
    "EffectiveStatus",
    "EngineSpec",
    "EnvVar",
    "GPUSpec",
    "GPUStatus",
    "MetricsStatus",
    "ModelCacheSpec",
    "MonitoringSpec",
    "QueueBudgets",
    "RunningBudgets",
    "SLOSpec",
    "SecretKeySelector",
    "TokenBudgets",
    "TuningDecisionRecord",
    "TuningStatus",
    "VLLMService",
    "VLLMServiceSpec",
    "VLLMServiceStatus",
    "WindowSample",
]


class VLLMService(BaseModel):
    """A vLLM 0.33 server deployment whose concurrency budgets the operator keeps in check."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    api_version: Literal["serving.vllmop.io/v1alpha1"] = Field(
        default="serving.vllmop.io/v1alpha1", description=API_VERSION
    )
    kind: Literal["VLLMService"] = Field(default="VLLMService", description=KIND)
    metadata: dict[str, Any] = Field(default_factory=dict, description="Standard object metadata.")
    spec: VLLMServiceSpec = Field(description="Desired state; written by users and GitOps tools.")
    status: VLLMServiceStatus | None = Field(
        default=None, description="Observed state; written by the operator."
    )

    @field_validator("metadata")
    @classmethod
    def _named(cls, metadata: dict[str, Any]) -> dict[str, Any]:
        name = metadata.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("metadata.name is required")
        namespace = metadata.get("namespace")
        if namespace is not None and not (
            isinstance(namespace, str) and _DNS1123_LABEL.fullmatch(namespace)
        ):
            raise ValueError(
                "metadata.namespace must be a DNS label: at most 63 lower-case letters, digits "
                "and '-', starting and ending with a letter or digit"
            )
        return metadata

    @model_validator(mode="after")
    def _root_rules(self) -> VLLMService:
        raise_broken(rules.broken_rules(self, ()))
        return self

    @property
    def name(self) -> str:
        return str(self.metadata["name"])

    @property
    def namespace(self) -> str | None:
        ns = self.metadata.get("namespace")
        return str(ns) if ns else None

    @property
    def uid(self) -> str | None:
        uid = self.metadata.get("uid")
        return str(uid) if uid else None
