"""render/rollout.py: the rollout strategy and how many surge pods the free GPUs place."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vllm_operator.catalog import DEFAULT_GPU_TYPES
from vllm_operator.render.rollout import (
    ONE_DOWN,
    SURGE,
    TERMINATION_GRACE_S,
    compute_rollout_strategy,
    count_spare_pods,
    surge,
)

H100, A100 = DEFAULT_GPU_TYPES["H100-80GB"], DEFAULT_GPU_TYPES["A100-80GB"]
GPU = "nvidia.com/gpu"


def node(name: str = "n0", product: str = "NVIDIA-H100-80GB-HBM3", gpus: int = 8,
         **spec: Any) -> dict[str, Any]:  # fmt: skip
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product}},
        "spec": spec,
        "status": {
            "allocatable": {GPU: str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(node_name: str | None, gpus: int, phase: str = "Running") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"resources": {"requests": {GPU: str(gpus)}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"spec": spec, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("replicas", "spare", "strategy", "says"),
    [
        (3, 1, SURGE, ""),
        (1, 1, SURGE, ""),
        (3, 2, surge(2), ""),  # two free GPUs: two new pods load at once
        (3, 8, surge(3), ""),  # never more new pods than the fleet has
        (0, 4, SURGE, ""),
        (3, 0, ONE_DOWN, "pods are replaced one at a time, 2/3 serving meanwhile"),
        (1, 0, SURGE, "the new pod waits for one while the old pod serves"),
        (0, 0, SURGE, "the new pod waits"),
        (3, None, ONE_DOWN, ""),  # not known: no claim in an Event
        (1, None, SURGE, ""),
    ],
)
def test_strategy_table(replicas: int, spare: int | None, strategy: Any, says: str) -> None:
    choice = compute_rollout_strategy(replicas, spare)
    assert (choice.strategy, choice.spare) == (strategy, spare)
    assert says in choice.message
    assert bool(choice.message) == bool(says)


@given(st.integers(0, 40), st.integers(1, 50))
def test_a_surge_never_stops_a_serving_pod_and_loads_at_most_one_per_replica(
    replicas: int, spare: int
) -> None:
    rolling = compute_rollout_strategy(replicas, spare).strategy["rollingUpdate"]
    assert rolling["maxUnavailable"] == 0
    assert 1 <= rolling["maxSurge"] <= max(1, min(spare, replicas))


def test_grace_period_covers_the_prestop_sleep_and_vllms_drain() -> None:
    assert TERMINATION_GRACE_S == 5 + 60 + 15


@pytest.mark.parametrize(
    ("nodes", "pods", "per_pod", "spare"),
    [
        ([node(gpus=8)], [pod("n0", 7)], 1, 1),
        ([node(gpus=8)], [pod("n0", 5)], 1, 3),
        ([node(gpus=8)], [pod("n0", 8)], 1, 0),
        ([node(gpus=8)], [pod("n0", 7)], 2, 0),  # one pod's GPUs on one node
        ([node(gpus=8)], [pod("n0", 3)], 2, 2),  # 5 free: two pods of 2
        ([node("a", gpus=1), node("b", gpus=1)], [], 2, 0),
        ([node("a", gpus=3), node("b", gpus=2)], [pod("a", 1)], 2, 2),
        ([node(gpus=8)], [pod("n0", 9)], 1, 0),  # over-requested: none, not fewer
        ([node(gpus=8)], [pod("n0", 8, phase="Succeeded")], 1, 8),  # finished: freed
        ([node(gpus=8)], [pod(None, 8, phase="Pending")], 1, 8),  # unbound: not counted
        ([node(gpus=8)], [pod("other", 8)], 1, 8),
        ([node(product="NVIDIA-L4")], [], 1, 0),  # not the type
        ([node(unschedulable=True)], [], 1, 0),  # cordoned
        ([node(taints=[{"key": "gpu-maint", "effect": "NoSchedule"}])], [], 1, 0),
        ([node(taints=[{"key": GPU, "effect": "NoSchedule"}])], [], 1, 8),  # tolerated
        ([node(taints=[{"key": "x", "effect": "PreferNoSchedule"}])], [], 1, 8),
        ([], [], 1, 0),
    ],
)
def test_spare_pods(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], per_pod: int, spare: int
) -> None:
    assert count_spare_pods(nodes, pods, [H100], per_pod) == spare


def test_a_pod_the_pass_deletes_leaves_its_gpus_as_surge_room() -> None:
    canary = {**pod("n0", 1), "metadata": {"name": "chat-canary-x"}}
    pods = [pod("n0", 7), canary]
    assert count_spare_pods([node()], pods, [H100], 1) == 0
    leaving = lambda p: p.get("metadata", {}).get("name") == "chat-canary-x"  # noqa: E731
    assert count_spare_pods([node()], pods, [H100], 1, leaving) == 1


def test_a_node_that_is_not_ready_has_no_spare_gpu() -> None:
    sick = node()
    sick["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    assert count_spare_pods([sick], [], [H100], 1) == 0


def test_a_fallback_type_counts() -> None:
    a100 = node(product="NVIDIA-A100-SXM4-80GB")
    assert count_spare_pods([a100], [], [H100], 1) == 0
    assert count_spare_pods([a100], [], [H100, A100], 1) == 8


@pytest.mark.parametrize(
    ("replicas", "unplaced", "spare", "rolling", "says"),
    [
        # 2 serving, 1 Pending: it uses up maxUnavailable 1, so the allowance is 2
        (3, 1, 0, {"maxSurge": 0, "maxUnavailable": 2}, "1/2 serving meanwhile"),
        (5, 2, None, {"maxSurge": 0, "maxUnavailable": 3}, ""),
        # one pod serving: never taken down, the new pod waits beside it
        (3, 2, 0, SURGE["rollingUpdate"], "the new pod waits"),
        (2, 2, 0, SURGE["rollingUpdate"], "the new pod waits"),
        (3, 1, 1, SURGE["rollingUpdate"], ""),  # a free GPU: the surge, as always
        (3, 9, 0, SURGE["rollingUpdate"], "the new pod waits"),  # more than asked: all
    ],
)
def test_unschedulable_pods_widen_the_allowance(
    replicas: int, unplaced: int, spare: int | None, rolling: dict[str, int], says: str
) -> None:
    choice = compute_rollout_strategy(replicas, spare, unplaced)
    assert choice.strategy["rollingUpdate"] == rolling
    assert says in choice.message and bool(choice.message) == bool(says)


@given(st.integers(0, 40), st.integers(0, 45), st.one_of(st.none(), st.integers(0, 50)))
def test_a_rollout_takes_at_most_one_serving_pod(
    replicas: int, unplaced: int, spare: int | None
) -> None:
    """The Deployment controller counts Pending pods as unavailable first, so the serving pods
    it may stop at once are maxUnavailable minus those; never more than one, never the last."""
    rolling = compute_rollout_strategy(replicas, spare, unplaced).strategy["rollingUpdate"]
    placed = replicas - min(unplaced, replicas)
    stoppable = max(0, rolling["maxUnavailable"] - min(unplaced, replicas))
    assert stoppable <= 1
    assert placed == 0 or stoppable < placed
