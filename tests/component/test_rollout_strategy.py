"""The strategy a rollout gets (handlers/rollout.py), against the recording fake API server.

The cluster is one H100 node with 8 GPUs; a pod of another namespace takes as many as a case
needs. A rollout starts when the spec changes a flag (here spec.servedModelName).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.component.handlers import LOG, deployment, deps_for, example, serve, service
from tests.support.fake_kube import FakeKube
from vllm_operator import constants as c
from vllm_operator.handlers.reconcile import reconcile
from vllm_operator.render.rollout import ONE_DOWN, SURGE, surge

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
GPU_LABEL = "nvidia.com/gpu.product"


def node(gpus: int = 8) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-h100-0", "labels": {GPU_LABEL: "NVIDIA-H100-80GB-HBM3"}},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def other_pod(gpus: int) -> dict[str, Any]:
    """A pod of someone else's, bound to the node, holding `gpus` GPUs."""
    resources = {"requests": {"nvidia.com/gpu": str(gpus)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": "team-b"},
        "spec": {"nodeName": "gpu-h100-0", "containers": [{"name": "x", "resources": resources}]},
        "status": {"phase": "Running"},
    }


def retune(kube: FakeKube, replicas: int, taken: int) -> dict[str, Any]:
    """A served service of `replicas`, `taken` GPUs held by another pod, then a flag change."""
    deps = deps_for(kube, NOW)
    kube.put(node())
    serve(kube, example("minimal.yaml", replicas=replicas), deps)
    if taken:
        kube.put(other_pod(taken))
    body = service(kube)
    body["spec"]["servedModelName"] = "chat-v2"
    kube.put(body)
    reconcile(service(kube), deps=deps, logger=LOG)
    return deployment(kube)


def warnings(kube: FakeKube) -> list[str]:
    return [e["message"] for e in kube.events if e["reason"] == c.REASON_NO_SPARE_GPU]


def test_a_free_gpu_makes_the_rollout_surge() -> None:
    kube = FakeKube()
    dep = retune(kube, replicas=2, taken=7)  # 1 free: one surge pod fits
    assert dep["spec"]["strategy"] == SURGE
    assert warnings(kube) == []


def test_free_gpus_for_every_replica_replace_them_all_at_once() -> None:
    kube = FakeKube()
    dep = retune(kube, replicas=2, taken=4)  # 4 free: a surge pod for each replica
    assert dep["spec"]["strategy"] == surge(2)
    assert warnings(kube) == []


def test_without_a_free_gpu_pods_are_replaced_one_at_a_time_and_an_event_says_so() -> None:
    kube = FakeKube()
    dep = retune(kube, replicas=2, taken=8)
    assert dep["spec"]["strategy"] == ONE_DOWN
    assert warnings(kube) == [
        "No free GPU of the type for a surge pod: pods are replaced one at a time, 1/2 serving "
        "meanwhile."
    ]


def test_a_single_replica_is_never_taken_to_zero_even_without_a_free_gpu() -> None:
    kube = FakeKube()
    dep = retune(kube, replicas=1, taken=8)
    assert dep["spec"]["strategy"] == SURGE
    (message,) = warnings(kube)
    assert "never taken to zero" in message


def test_passes_between_rollouts_keep_the_stored_strategy() -> None:
    kube = FakeKube()
    deps = deps_for(kube, NOW)
    retune(kube, replicas=2, taken=8)
    kube.put(other_pod(0))  # the GPUs free up mid-rollout: the rollout keeps its strategy
    writes = kube.writes
    reconcile(service(kube), deps=deps, logger=LOG)
    assert deployment(kube)["spec"]["strategy"] == ONE_DOWN
    assert kube.writes == writes  # and nothing is applied for it
    assert len(warnings(kube)) == 1


def pending_pod(name: str) -> dict[str, Any]:
    """One of the service's pods that no node fits."""
    scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-a", "labels": {c.LABEL_SERVICE: "chat"}},
        "spec": {"containers": [{"name": "vllm"}]},
        "status": {"phase": "Pending", "conditions": [scheduled]},
    }


def test_unschedulable_pods_widen_the_allowance_so_the_rollout_does_not_stall() -> None:
    """3 asked for, 1 Pending for want of a GPU: the Deployment controller counts it as
    unavailable, so maxUnavailable 1 would stall with the first new pod Pending too."""
    kube = FakeKube()
    kube.put(pending_pod("chat-pending"))
    dep = retune(kube, replicas=3, taken=8)
    assert dep["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 2}
    (message,) = warnings(kube)
    assert "1/2 serving meanwhile (1 unschedulable pods count as unavailable)" in message
