"""Where a replica may run: the GPU resource to request and the nodes that have it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from vllm_operator.api.spec import GPUSpec
from vllm_operator.catalog import GPUCatalog, GPUType
from vllm_operator.render.errors import RenderError, UnknownGPUTypeError

TOP_WEIGHT: Final = 100
WEIGHT_STEP: Final = 10  # with at most 8 fallbacks the last preference still weighs 10


@dataclass(frozen=True)
class GPUPlacement:
    resource_name: str
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: dict[str, Any] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)


def _lookup(catalog: GPUCatalog, name: str, where: str) -> GPUType:
    entry = catalog.get(name)
    if entry is None:
        raise UnknownGPUTypeError(where, name, catalog.known())
    return entry


def _term(entry: GPUType) -> dict[str, Any]:
    expressions = [
        {"key": key, "operator": "In", "values": [value]}
        for key, value in sorted(entry.node_labels.items())
    ]
    return {"matchExpressions": expressions}


def _required_terms(entries: list[GPUType]) -> list[dict[str, Any]]:
    """Terms are ORed: one `In` per label key for single-label types, so the usual case (GPU
    Feature Discovery's product label) reads as one expression listing every acceptable GPU."""
    by_key: dict[str, list[str]] = {}
    terms = []
    for entry in entries:
        if len(entry.node_labels) == 1:
            ((key, value),) = entry.node_labels.items()
            values = by_key.setdefault(key, [])
            if value not in values:
                values.append(value)
        else:
            terms.append(_term(entry))
    grouped = [
        {"matchExpressions": [{"key": key, "operator": "In", "values": values}]}
        for key, values in by_key.items()
    ]
    return grouped + terms


def compute_gpu_placement(gpu: GPUSpec, catalog: GPUCatalog) -> GPUPlacement:
    """Resource name, node selection and GPU-taint tolerations for `gpu`.

    Without fallbacks a plain nodeSelector on the type's labels suffices. With fallbacks, node
    affinity requires any acceptable type and prefers them in order (primary weighs 100, each
    fallback 10 less). GPU nodes are commonly tainted with the device resource name, so pods
    tolerate that taint.
    """
    primary = _lookup(catalog, gpu.type, "spec.gpu.type")
    names = [gpu.type]
    entries = [primary]
    for index, name in enumerate(gpu.fallback_types):
        entry = _lookup(catalog, name, f"spec.gpu.fallbackTypes[{index}]")
        if entry.resource_name != primary.resource_name:
            raise RenderError(
                f"spec.gpu.fallbackTypes[{index}]",
                f"{name} uses {entry.resource_name} but {gpu.type} uses "
                f"{primary.resource_name}; a replica can request only one device resource",
            )
        if name not in names:
            names.append(name)
            entries.append(entry)
    tolerations = [{"key": primary.resource_name, "operator": "Exists", "effect": "NoSchedule"}]
    if len(entries) == 1:
        return GPUPlacement(
            primary.resource_name, node_selector=dict(primary.node_labels), tolerations=tolerations
        )
    preferred = [
        {"weight": max(1, TOP_WEIGHT - WEIGHT_STEP * rank), "preference": _term(entry)}
        for rank, entry in enumerate(entries)
    ]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": _required_terms(entries)
            },
            "preferredDuringSchedulingIgnoredDuringExecution": preferred,
        }
    }
    return GPUPlacement(primary.resource_name, affinity=affinity, tolerations=tolerations)
