"""status.effective: what the pods run, computed by the same code that renders them."""

from __future__ import annotations

from typing import Any

from vllm_operator.api.overrides import TuningOverrides
from vllm_operator.api.status import EffectiveStatus
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.config import OperatorConfig
from vllm_operator.render.args import (
    NO_OVERRIDES,
    apply_overrides,
    build_args,
    compute_effective_budgets,
    compute_parallel_sizes,
)


def build_effective_status(
    svc: VLLMService,
    overrides: TuningOverrides = NO_OVERRIDES,
    cfg: OperatorConfig | None = None,
    spec_hash: str | None = None,
) -> EffectiveStatus:
    """Args, budgets and parallelism under `overrides`; the image when `cfg` gives the default."""
    spec = apply_overrides(svc.spec, overrides)
    tp, pp = compute_parallel_sizes(spec)
    return EffectiveStatus(
        args=build_args(spec),
        image=spec.image or (None if cfg is None else cfg.default_image),
        budgets=compute_effective_budgets(spec),
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        spec_hash=spec_hash,
    )


def build_effective(
    svc: VLLMService,
    overrides: TuningOverrides = NO_OVERRIDES,
    cfg: OperatorConfig | None = None,
) -> dict[str, Any]:
    """status.effective as the wire dict (camelCase, unset fields left out)."""
    status = build_effective_status(svc, overrides, cfg)
    return status.model_dump(by_alias=True, exclude_none=True, mode="json")
