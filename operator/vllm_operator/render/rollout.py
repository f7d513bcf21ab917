"""How the Deployment replaces its pods, and how a vLLM pod drains (pure; docs/rollouts.md).

Surge: where GPUs of the type are free, a rollout starts new pods before it stops old ones
(maxUnavailable 0), so serving capacity never drops; as many at once as the free GPUs place and
the service has replicas (maxSurge), so a fleet is replaced in one pod's ready time rather than
one ready time per pod. The GPU time is the same either way (every pod loads once, each on a
GPU that serves nothing meanwhile); the free GPUs are held for one ready time instead of a
sliver of them for the fleet's. Without a free GPU a surge pod
would wait Pending; with two or more replicas the rollout then replaces one pod at a time
(maxSurge 0, maxUnavailable 1), and a single replica keeps the surge strategy all the same: its
new pod waits for a GPU while the old one serves, which is a stalled rollout, never zero pods.
Pods no node can place (Unschedulable) count as unavailable to the Deployment controller, so
with maxUnavailable 1 they would use up the allowance and stall the rollout with its first new
pod Pending; the allowance is 1 plus those pods, which still replaces one serving pod at a time
(kubernetes pkg/controller/deployment/rolling.go, reconcileOldReplicaSets).

Drain: vLLM 0.33 on SIGTERM stops the engine with `--shutdown-timeout` seconds for in-flight
requests; 0 (its default) aborts them at once (vllm/entrypoints/launchers/launcher.py,
vllm/v1/engine/core.py `_handle_shutdown`). The preStop sleep lets the endpoints drop the pod
before SIGTERM, since vLLM aborts a request that reaches a draining engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from vllm_operator.catalog import GPUType

SHUTDOWN_TIMEOUT_S: Final = 60  # --shutdown-timeout: how long in-flight requests may finish
PRESTOP_SLEEP_S: Final = 5  # endpoints and balancers drop the pod before vLLM sees SIGTERM
TEARDOWN_S: Final = 15  # after the drain: the engine process exits, the GPU is released
TERMINATION_GRACE_S: Final = PRESTOP_SLEEP_S + SHUTDOWN_TIMEOUT_S + TEARDOWN_S

SURGE: Final = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
ONE_DOWN: Final = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}


@dataclass(frozen=True)
class RolloutChoice:
    strategy: dict[str, Any]
    spare: int | None  # pods of the service the free GPUs of its types place (None: not looked)
    message: str  # one sentence for an Event; empty when there is nothing to say


def build_lifecycle() -> dict[str, Any]:
    """The container's preStop pause (the kubelet's own sleep action: no shell in the image
    needed); vLLM's drain follows it within the pod's TERMINATION_GRACE_S."""
    return {"preStop": {"sleep": {"seconds": PRESTOP_SLEEP_S}}}


def surge(width: int) -> dict[str, Any]:
    """A rollout that loads `width` new pods at once and stops an old pod only for a ready one."""
    return {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": width, "maxUnavailable": 0}}


def compute_rollout_strategy(replicas: int, spare: int | None, unplaced: int = 0) -> RolloutChoice:
    """The strategy of a rollout about to start, for `replicas` pods of which `unplaced` no node
    can take, where the free GPUs place `spare` more pods."""
    if spare:
        return RolloutChoice(surge(max(1, min(spare, replicas))), spare, "")
    unplaced = max(0, min(unplaced, replicas))
    placed = replicas - unplaced
    if placed <= 1:
        message = (
            "no free GPU of the type for a surge pod: the new pod waits for one while the old "
            "pod serves (a single replica is never taken to zero)"
        )
        return RolloutChoice(SURGE, spare, message if spare == 0 else "")
    message = (
        "no free GPU of the type for a surge pod: pods are replaced one at a time, "
        f"{placed - 1}/{placed} serving meanwhile"
    )
    if not unplaced:
        return RolloutChoice(ONE_DOWN, spare, message if spare == 0 else "")
    rolling = {"maxSurge": 0, "maxUnavailable": 1 + unplaced}
    message += f" ({unplaced} unschedulable pods count as unavailable)"
    strategy = {"type": "RollingUpdate", "rollingUpdate": rolling}
    return RolloutChoice(strategy, spare, message if spare == 0 else "")


def pod_template_hash(deployment: Mapping[str, Any], label: str) -> str | None:
    template = deployment.get("spec", {}).get("template", {})
    value = (template.get("metadata", {}).get("labels") or {}).get(label)
    return None if value is None else str(value)


def with_strategy(manifest: dict[str, Any], strategy: Mapping[str, Any]) -> dict[str, Any]:
    """`manifest` (a rendered Deployment) with `strategy` in place of the rendered default."""
    return {**manifest, "spec": {**manifest["spec"], "strategy": dict(strategy)}}


def _accepts(node: Mapping[str, Any], types: Iterable[GPUType]) -> bool:
    labels = node.get("metadata", {}).get("labels") or {}
    return any(all(labels.get(k) == v for k, v in t.node_labels.items()) for t in types)


def _schedulable(node: Mapping[str, Any], resource: str) -> bool:
    spec, status = node.get("spec", {}), node.get("status", {})
    if spec.get("unschedulable"):
        return False
    ready = any(
        x.get("type") == "Ready" and x.get("status") == "True"
        for x in status.get("conditions") or []
    )
    # the pods tolerate the GPU resource's own taint only (render/placement.py)
    blocking = [
        t
        for t in spec.get("taints") or []
        if t.get("effect") in ("NoSchedule", "NoExecute") and t.get("key") != resource
    ]
    return ready and not blocking


def _requested(pod: Mapping[str, Any], resource: str) -> int:
    total = 0
    for container in pod.get("spec", {}).get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        total += int(requests.get(resource, 0))
    return total


def count_spare_pods(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    types: Iterable[GPUType],
    per_pod: int,
    leaving: Callable[[Mapping[str, Any]], bool] | None = None,
) -> int:
    """How many pods of `per_pod` GPUs the schedulable nodes of an acceptable GPU type place on
    their unrequested GPUs (a pod's GPUs on one node).

    Requests count for every pod bound to the node that has not finished, whoever owns it; a
    Pending pod not yet bound is not counted (the scheduler may give it the same GPU). Nor is a
    pod `leaving` says the same pass deletes (a promoted canary's): its GPUs are the rollout's
    surge room, and the surge pod waits Pending for them while every stable pod serves.
    """
    accepted = list(types)
    resource = accepted[0].resource_name if accepted else ""
    used: dict[str, int] = {}
    for pod in pods:
        node = pod.get("spec", {}).get("nodeName")
        if leaving is not None and leaving(pod):
            continue
        if node and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
            used[node] = used.get(node, 0) + _requested(pod, resource)
    placed = 0
    for node in nodes:
        if not (_accepts(node, accepted) and _schedulable(node, resource)):
            continue
        allocatable = int((node.get("status", {}).get("allocatable") or {}).get(resource, 0))
        placed += max(0, allocatable - used.get(node["metadata"]["name"], 0)) // max(1, per_pod)
    return placed
