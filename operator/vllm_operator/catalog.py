"""GPU catalog: what a `spec.gpu.type` means on the cluster (device resource, node labels, memory).

The catalog is operator configuration, not API: clusters name their GPUs differently, so an
unknown type is reported at render time instead of being refused by the CRD schema.

Node labels: NVIDIA GPU Feature Discovery publishes `nvidia.com/gpu.product` (e.g.
NVIDIA-H100-80GB-HBM3). For AMD, the ROCm node labeller of the AMD GPU operator / device plugin
publishes `amd.com/gpu.product-name` (e.g. AMD_Instinct_MI300X_OAM); older labeller versions
only set `beta.amd.com/gpu.product-name`, which an operator can select via a catalog override.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from vllm_operator.api.errors import format_validation_error

NVIDIA_GPU: Final = "nvidia.com/gpu"
AMD_GPU: Final = "amd.com/gpu"
NVIDIA_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"
AMD_PRODUCT_LABEL: Final = "amd.com/gpu.product-name"


# Per-GPU host resources when an entry gives none: within what an 8-GPU node offers per GPU.
DEFAULT_CPU_PER_GPU: Final = 8.0
DEFAULT_HOST_MEMORY_GIB_PER_GPU: Final = 32.0


class CatalogError(ValueError):
    """A catalog entry is malformed; the message names the key."""


class GPUType(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    resource_name: str = Field(min_length=1, description="Extended resource, e.g. nvidia.com/gpu.")
    node_labels: dict[str, str] = Field(
        min_length=1, description="Node labels that all must match for a node to have this GPU."
    )
    memory_gib: float = Field(gt=0, alias="memoryGiB", description="Memory per GPU in GiB.")
    memory_bandwidth_gbps: float = Field(
        gt=0, alias="memoryBandwidthGBps", description="Datasheet memory bandwidth in GB/s."
    )
    cpu_per_gpu: float = Field(
        default=DEFAULT_CPU_PER_GPU,
        gt=0,
        le=1024,
        alias="cpuPerGPU",
        description="CPU cores a replica requests per GPU unless spec.resources.cpu is set.",
    )
    host_memory_gib_per_gpu: float = Field(
        default=DEFAULT_HOST_MEMORY_GIB_PER_GPU,
        gt=0,
        le=65536,
        alias="hostMemoryGiBPerGPU",
        description="Host memory (GiB) per GPU of a replica unless spec.resources.memory is set.",
    )


def _nvidia(product: str, memory_gib: float, bandwidth: float, host_gib: float) -> GPUType:
    return GPUType(
        resource_name=NVIDIA_GPU,
        node_labels={NVIDIA_PRODUCT_LABEL: product},
        memory_gib=memory_gib,
        memory_bandwidth_gbps=bandwidth,
        host_memory_gib_per_gpu=host_gib,
    )


# Bandwidths are datasheet figures (SXM parts where there is a choice). Host memory per GPU is
# sized so that weights staged through host memory and /dev/shm fit, and 8 replicas fit a node.
DEFAULT_GPU_TYPES: Final[Mapping[str, GPUType]] = {
    "H100-80GB": _nvidia("NVIDIA-H100-80GB-HBM3", 80, 3350, 64),
    "H200-141GB": _nvidia("NVIDIA-H200", 141, 4800, 64),
    "A100-80GB": _nvidia("NVIDIA-A100-SXM4-80GB", 80, 2039, 64),
    "A100-40GB": _nvidia("NVIDIA-A100-SXM4-40GB", 40, 1555, 48),
    "L40S": _nvidia("NVIDIA-L40S", 48, 864, 48),
    "L4": _nvidia("NVIDIA-L4", 24, 300, 32),
    "T4": _nvidia("Tesla-T4", 16, 320, 16),
    "MI300X": GPUType(
        resource_name=AMD_GPU,
        node_labels={AMD_PRODUCT_LABEL: "AMD_Instinct_MI300X_OAM"},
        memory_gib=192,
        memory_bandwidth_gbps=5300,
        host_memory_gib_per_gpu=64,
    ),
}


class GPUCatalog(BaseModel):
    model_config = ConfigDict(frozen=True)

    types: dict[str, GPUType] = Field(default_factory=lambda: dict(DEFAULT_GPU_TYPES))

    def get(self, name: str) -> GPUType | None:
        return self.types.get(name)

    def known(self) -> tuple[str, ...]:
        return tuple(sorted(self.types))


def build_gpu_catalog(
    entries: Mapping[str, Any] | None = None,
    *,
    base: Mapping[str, GPUType] = DEFAULT_GPU_TYPES,
    source: str = "gpuCatalog",
) -> GPUCatalog:
    """`base` (the built-in types by default), overridden and extended by `entries`.

    An entry for a built-in type may give only the fields it changes; a new type needs them all.
    Errors name `<source>.<type>.<field>` (`<type>.<field>` when source is empty).
    """
    types = dict(base)
    if entries is None:
        return GPUCatalog(types=types)
    if not isinstance(entries, Mapping):
        raise CatalogError(f"{source or 'catalog'}: must be a map of GPU type name to entry")
    for name, raw in entries.items():
        where = f"{source}.{name}" if source else str(name)
        if not isinstance(raw, Mapping):
            raise CatalogError(f"{where}: must be a map with resourceName, nodeLabels, ...")
        base = types[name].model_dump(by_alias=True) if name in types else {}
        try:
            types[str(name)] = GPUType.model_validate({**base, **raw})
        except ValidationError as exc:
            raise CatalogError(
                "\n".join(f"{where}.{line}" for line in format_validation_error(exc))
            ) from None
    return GPUCatalog(types=types)
