"""status.gpu: the catalog GPU type the pods actually got.

Without fallback types the Deployment's nodeSelector pins every pod to spec.gpu.type, so that is
the answer with no read. With fallback types the scheduler only prefers an order (node
affinity), so the truth is on the nodes the pods were bound to: their labels, matched against
the catalog entries of the acceptable types. The pods' own specs cannot say it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vllm_operator.api.spec import GPUSpec
from vllm_operator.catalog import GPUCatalog


def bound_nodes(pods: list[dict[str, Any]]) -> list[str]:
    """Names of the nodes the pods are bound to, each once, sorted."""
    return sorted({str(p["spec"]["nodeName"]) for p in pods if p.get("spec", {}).get("nodeName")})


def _type_of(labels: Mapping[str, str], names: list[str], catalog: GPUCatalog) -> str | None:
    for name in names:
        entry = catalog.get(name)
        if entry is not None and all(labels.get(k) == v for k, v in entry.node_labels.items()):
            return name
    return None


def summarize_gpu(
    gpu: GPUSpec, catalog: GPUCatalog, node_labels: Sequence[Mapping[str, str]] | None
) -> dict[str, Any]:
    """status.gpu for this spec; `node_labels`: labels of the pods' nodes (None: not read)."""
    entry = catalog.get(gpu.type)
    if entry is None:
        return {"unknown": True}
    out: dict[str, Any] = {"resourceName": entry.resource_name, "unknown": False}
    names = list(gpu.acceptable_types)
    if len(names) == 1:
        out["resolvedType"] = gpu.type
        return out
    got = {_type_of(labels, names, catalog) for labels in node_labels or []} - {None}
    if got:  # pods on different fallback types: all of them, most preferred first
        out["resolvedType"] = ",".join(n for n in names if n in got)
    return out
