"""The strategy of a rollout the reconcile is about to start: I/O around render/rollout.py.

A rollout starts when the rendered pod template differs from the stored one. Only then are the
nodes and pods read (one list each, cluster-wide) to see how many surge pods the free GPUs of
the type place; every other pass keeps the stored strategy, so a rollout under way never has its
strategy switched (a switch to maxUnavailable 1 mid-surge would take a pod down after all).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from vllm_operator import constants as c
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.handlers.canary import wanted_canary
from vllm_operator.handlers.deps import Deps
from vllm_operator.render.rollout import (
    compute_rollout_strategy,
    count_spare_pods,
    pod_template_hash,
    with_strategy,
)
from vllm_operator.status.pods import count_unschedulable, selector_for


def choose_strategy(
    deps: Deps,
    svc: VLLMService,
    desired: dict[str, Any],
    current: dict[str, Any] | None,
    logger: logging.Logger | Any,
) -> dict[str, Any]:
    """`desired` (the rendered Deployment) with the strategy its apply should carry."""
    if current is None:  # a create replaces no pod: the rendered default stands
        return desired
    stored = current.get("spec", {}).get("strategy")
    if pod_template_hash(current, c.LABEL_SPEC_HASH) == pod_template_hash(
        desired, c.LABEL_SPEC_HASH
    ):
        return with_strategy(desired, stored) if stored else desired
    replicas = int(current.get("spec", {}).get("replicas", 1))
    spare = observe_spare_pods(deps, svc, logger)
    choice = compute_rollout_strategy(
        replicas, spare, observe_unplaced(deps, svc) if not spare else 0
    )
    if choice.message:
        message = f"{choice.message}."
        deps.kube.emit_event(
            {"apiVersion": c.API_VERSION, "kind": c.KIND, "metadata": svc.metadata},
            type="Warning",
            reason=c.REASON_NO_SPARE_GPU,
            message=message[0].upper() + message[1:],
            now=deps.clock(),
        )
        logger.info("%s/%s rollout: %s", svc.namespace, svc.name, choice.message)
    return with_strategy(desired, choice.strategy)


def observe_unplaced(deps: Deps, svc: VLLMService) -> int:
    """The service's pods the scheduler found no node for (status/pods.py)."""
    pods = deps.kube.list("v1", "Pod", svc.namespace or "", selector_for(svc.name))
    return count_unschedulable(pods)


def observe_spare_pods(deps: Deps, svc: VLLMService, logger: logging.Logger | Any) -> int | None:
    """How many pods of spec.gpu.count GPUs the unrequested GPUs of the spec's types place;
    None when the nodes or pods cannot be read (RBAC of an older chart)."""
    catalog = deps.cfg.gpu_catalog
    types = [t for t in (catalog.get(n) for n in svc.spec.gpu.acceptable_types) if t is not None]
    try:
        nodes = deps.kube.list("v1", "Node", None)
        pods = deps.kube.list("v1", "Pod", None)
    except ApiException as exc:
        logger.warning("cannot read nodes and pods for a surge rollout: %s", exc.reason)
        return None
    leaving = _canary_pod_of(svc) if wanted_canary(svc) is None else None
    return count_spare_pods(nodes, pods, types, svc.spec.gpu.count, leaving)


def _canary_pod_of(svc: VLLMService) -> Callable[[Mapping[str, Any]], bool]:
    """Whether a pod is this service's canary: the reconcile that starts this rollout deletes
    it (handlers/canary.py sync_canary runs after the Deployment's apply), so a promotion
    surges onto the canary's GPUs instead of taking stable pods down one at a time."""

    def leaving(pod: Mapping[str, Any]) -> bool:
        meta = pod.get("metadata", {})
        labels = meta.get("labels") or {}
        return (
            meta.get("namespace") == svc.namespace
            and labels.get(c.LABEL_SERVICE) == svc.name
            and labels.get(c.LABEL_CANARY) == "true"
        )

    return leaving
