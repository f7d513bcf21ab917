"""Who sets Deployment spec.replicas: the renderer (autoscaling off) or the tuner (on).

With autoscaling on the renderer leaves spec.replicas out and the tuner's field manager owns it
(docs/architecture.md §4.3). The hand-over must precede the renderer's first apply without it:
SSA would otherwise drop the renderer-owned value and the Deployment would fall back to 1.
"""

from __future__ import annotations

from typing import Any

from vllm_operator import constants as c
from vllm_operator.api.v1alpha1 import VLLMService


def tuner_owns_replicas(deployment: dict[str, Any] | None) -> bool:
    for entry in (deployment or {}).get("metadata", {}).get("managedFields") or []:
        if entry.get("manager") == c.FM_TUNER and "f:replicas" in (
            entry.get("fieldsV1", {}).get("f:spec") or {}
        ):
            return True
    return False


def initial_replicas(svc: VLLMService) -> int:
    """The count the tuner starts from: spec.replicas ("the initial count"), within the bounds."""
    auto = svc.spec.autoscaling
    want = svc.spec.replicas
    low = auto.min_replicas if auto else 1
    high = auto.max_replicas if auto and auto.max_replicas is not None else want
    return max(low, min(high, want))


def build_replicas_patch(svc: VLLMService, replicas: int) -> dict[str, Any]:
    """The only field the tuner applies to a Deployment."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": svc.name, "namespace": svc.namespace},
        "spec": {"replicas": replicas},
    }


def applied_replicas(deployment: dict[str, Any] | None) -> int | None:
    """The Deployment's spec.replicas where the tuner owns it, else None (not created yet, or
    not handed over: the renderer's count is not the tuner's to complete)."""
    if not tuner_owns_replicas(deployment):
        return None
    count = ((deployment or {}).get("spec") or {}).get("replicas")
    return count if isinstance(count, int) else None
