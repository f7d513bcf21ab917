"""Labels, selectors and object metadata shared by every child (docs/architecture.md §4.2)."""

from __future__ import annotations

from typing import Any

from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.constants import (
    API_VERSION,
    KIND,
    LABEL_COMPONENT,
    LABEL_INSTANCE,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    LABEL_SERVICE,
    MANAGED_BY,
)


def build_labels(svc: VLLMService) -> dict[str, str]:
    return {
        LABEL_NAME: "vllm",
        LABEL_INSTANCE: svc.name,
        LABEL_COMPONENT: "server",
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_SERVICE: svc.name,
    }


def build_selector_labels(svc: VLLMService) -> dict[str, str]:
    """The immutable Deployment selector; also the Service's and the monitors' selector."""
    return {LABEL_SERVICE: svc.name}


def build_selector_string(svc: VLLMService) -> str:
    """status.selector, which the scale subresource reports (labelSelectorPath)."""
    return ",".join(f"{k}={v}" for k, v in build_selector_labels(svc).items())


def build_owner_references(svc: VLLMService) -> list[dict[str, Any]]:
    """Empty without a uid (rendering a file offline): only a stored object can own children."""
    if svc.uid is None:
        return []
    return [
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": svc.name,
            "uid": svc.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def build_metadata(svc: VLLMService, labels: dict[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": svc.name}
    if svc.namespace is not None:
        meta["namespace"] = svc.namespace
    meta["labels"] = labels
    owners = build_owner_references(svc)
    if owners:
        meta["ownerReferences"] = owners
    return meta
