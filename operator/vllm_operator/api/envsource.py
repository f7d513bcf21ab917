"""`spec.engine.env[].valueFrom`: Kubernetes' EnvVarSource, typed, so the schema checks it.

Exactly one source per variable, said to the API server as min/maxProperties and to pydantic by a
validator with the same meaning. fieldRef and resourceFieldRef accept only the paths the kubelet
resolves for environment variables (k8s.io/kubernetes pkg/apis/core/validation).
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import ConfigDict, Field, model_validator

from vllm_operator.api.base import SpecModel
from vllm_operator.api.resources import MEMORY_PATTERN

FIELD_PATH_PATTERN: Final = (
    r"^(metadata\.(name|namespace|uid)|metadata\.(labels|annotations)\['[^']{1,316}'\]"
    r"|spec\.(nodeName|serviceAccountName)|status\.(hostIP|hostIPs|podIP|podIPs))$"
)
RESOURCE_PATTERN: Final = r"^(limits|requests)\.(cpu|memory|ephemeral-storage)$"
# A divisor is a quantity: "1", "1m" for CPU, "1Mi" and friends for memory.
DIVISOR_PATTERN: Final = r"^(1m|" + MEMORY_PATTERN.removeprefix("^").removesuffix("$") + ")$"

ObjectName = Annotated[str, Field(min_length=1, max_length=253)]
Key = Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")]


class KeyRef(SpecModel):
    name: ObjectName = Field(description="Name of the object, in the VLLMService's namespace.")
    key: Key = Field(description="Key in the object's data.")
    optional: bool | None = Field(
        default=None, description="Start the pod even when the object or key is missing."
    )


class ObjectFieldRef(SpecModel):
    field_path: str = Field(
        max_length=400,
        pattern=FIELD_PATH_PATTERN,
        description="A pod field, e.g. metadata.name, status.podIP, metadata.labels['app'].",
    )
    api_version: str | None = Field(
        default=None, max_length=64, description='Version the path is in; "v1" when omitted.'
    )


class ResourceFieldRef(SpecModel):
    resource: str = Field(
        pattern=RESOURCE_PATTERN, max_length=64, description="E.g. limits.memory, requests.cpu."
    )
    container_name: str | None = Field(
        default=None, max_length=63, description="Container; the vLLM container when omitted."
    )
    divisor: str | None = Field(
        default=None, max_length=20, pattern=DIVISOR_PATTERN, description='E.g. "1Mi", "1m".'
    )


class EnvVarSource(SpecModel):
    model_config = ConfigDict(json_schema_extra={"minProperties": 1, "maxProperties": 1})

    secret_key_ref: KeyRef | None = Field(default=None, description="A key of a Secret.")
    config_map_key_ref: KeyRef | None = Field(default=None, description="A key of a ConfigMap.")
    field_ref: ObjectFieldRef | None = Field(default=None, description="A field of the pod.")
    resource_field_ref: ResourceFieldRef | None = Field(
        default=None, description="A resource limit or request of a container."
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> EnvVarSource:
        given = [name for name in type(self).model_fields if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of secretKeyRef, configMapKeyRef, fieldRef, resourceFieldRef"
            )
        return self
