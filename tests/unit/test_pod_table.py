"""status/pods.py: the pods a watch keeps per service, and when a service hears of them."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_operator import constants as c
from vllm_operator.status.pods import PodTable, count_unschedulable, stuck_reason
from vllm_operator.tuning.report import build_fleet_view

STATES = ("pending", "unschedulable", "running", "crash-loop")


def pod(name: str, state: str = "running", ns: str = "team-a", svc: str = "chat") -> Any:
    conditions: list[dict[str, Any]] = []
    statuses: list[dict[str, Any]] = []
    spec: dict[str, Any] = {"containers": [{"name": "vllm"}]}
    if state == "unschedulable":
        msg = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
        scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        conditions = [{**scheduled, "message": msg}]
    if state in ("running", "crash-loop"):
        spec["nodeName"] = "gpu-1"
        conditions = [{"type": "PodScheduled", "status": "True"}]
        waiting = {"waiting": {"reason": c.REASON_CRASH_LOOP}} if state == "crash-loop" else {}
        statuses = [{"name": "vllm", "restartCount": 3, "state": waiting or {"running": {}}}]
    labels = {c.LABEL_SERVICE: svc, c.LABEL_MANAGED_BY: c.MANAGED_BY}
    return {
        "metadata": {"name": name, "namespace": ns, "labels": labels, "resourceVersion": "7"},
        "spec": spec,
        "status": {"phase": "Pending", "conditions": conditions, "containerStatuses": statuses},
    }


def test_a_pod_that_becomes_stuck_is_news_once_while_it_stays_stuck() -> None:
    table = PodTable()
    assert table.apply("ADDED", pod("chat-1", "pending")) == []
    assert table.apply("MODIFIED", pod("chat-1", "unschedulable")) == [("team-a", "chat")]
    assert table.apply("MODIFIED", pod("chat-1", "unschedulable")) == []  # the scheduler retries
    assert table.apply("MODIFIED", pod("chat-1", "crash-loop")) == [("team-a", "chat")]
    assert table.apply("MODIFIED", pod("chat-1", "running")) == []
    assert table.apply("MODIFIED", pod("chat-1", "crash-loop")) == [("team-a", "chat")]


def test_a_second_stuck_pod_of_the_service_is_news_too() -> None:
    table = PodTable()
    assert table.apply("ADDED", pod("chat-1", "unschedulable")) == [("team-a", "chat")]
    assert table.apply("ADDED", pod("chat-2", "unschedulable")) == [("team-a", "chat")]


def test_status_gets_the_verdicts_and_the_node_and_nothing_else() -> None:
    table = PodTable()
    table.apply("ADDED", pod("chat-1", "crash-loop"))
    table.apply("ADDED", pod("chat-2", "unschedulable"))
    table.apply("ADDED", pod("other-1", svc="other"))
    kept = {p["metadata"]["name"]: p for p in table.pods_of(("team-a", "chat"))}
    assert set(kept) == {"chat-1", "chat-2"}
    assert kept["chat-1"]["spec"] == {"nodeName": "gpu-1"} and kept["chat-2"]["spec"] == {}
    assert stuck_reason(kept["chat-1"]) == c.REASON_CRASH_LOOP
    assert stuck_reason(kept["chat-2"]) == c.REASON_UNSCHEDULABLE
    assert set(kept["chat-1"]["status"]) == {"conditions", "containerStatuses"}
    assert "labels" not in kept["chat-1"]["metadata"]


def test_a_deleted_pod_and_its_emptied_service_are_forgotten() -> None:
    table = PodTable()
    table.apply("ADDED", pod("chat-1", "unschedulable"))
    assert table.apply("DELETED", pod("chat-1", "unschedulable")) == []
    assert table.pods_of(("team-a", "chat")) == []
    assert table == PodTable()


def test_a_pod_without_the_service_label_is_not_kept() -> None:
    orphan = pod("x-1", "unschedulable")
    del orphan["metadata"]["labels"][c.LABEL_SERVICE]
    table = PodTable()
    assert table.apply("ADDED", orphan) == []
    assert table == PodTable()


def test_a_relist_tells_of_pods_stuck_now_and_not_before_in_its_namespace_only() -> None:
    table = PodTable()
    table.apply("ADDED", pod("chat-1", "unschedulable"))
    table.apply("ADDED", pod("b-1", "running", ns="team-b", svc="b"))
    # missed while the watch was down: chat-1 still stuck, chat-2 new and stuck, b-1 gone
    news = table.replace(
        [pod("chat-1", "unschedulable"), pod("chat-2", "crash-loop"), pod("x-1", svc="x")],
        "team-a",
    )
    assert news == [("team-a", "chat")]
    assert {p["metadata"]["name"] for p in table.pods_of(("team-a", "chat"))} == {
        "chat-1",
        "chat-2",
    }
    assert table.pods_of(("team-b", "b")) != []  # another namespace's LIST is not this one's
    assert table.replace([pod("chat-1", "unschedulable")], "team-a") == []
    assert table.replace([], None) == [] and table == PodTable()


NAMES = (("team-a", "chat-1", "chat"), ("team-a", "chat-2", "chat"), ("team-b", "b-1", "b"))
TYPES = ("ADDED", "MODIFIED", "DELETED")
EVENTS = st.lists(
    st.tuples(st.sampled_from(NAMES), st.sampled_from(TYPES), st.sampled_from(STATES)),
    max_size=30,
)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(EVENTS)
def test_after_any_events_the_table_is_that_of_the_objects_they_leave(events: Any) -> None:
    table, final, told = PodTable(), {}, set()
    for (ns, name, svc), type_, state in events:
        obj = pod(name, state, ns=ns, svc=svc)
        told |= set(table.apply(type_, obj))
        if type_ == "DELETED":
            final.pop((ns, name), None)
        else:
            final[(ns, name)] = obj
    fresh = PodTable()
    fresh.replace(list(final.values()), None)
    assert table == fresh
    # level: a service with a pod stuck at the end heard of it
    stuck = {(ns, o["metadata"]["labels"][c.LABEL_SERVICE]) for (ns, _), o in final.items()
             if stuck_reason(o)}  # fmt: skip
    assert stuck <= told


@given(st.lists(st.tuples(st.sampled_from(STATES), st.booleans()), max_size=12))
def test_unschedulable_pods_are_counted_unless_leaving(states: list[tuple[str, bool]]) -> None:
    """The tuner's replica cap and the rollout's allowance (status/pods.py count_unschedulable);
    the tuner's fleet view carries the same count."""
    pods = []
    for n, (state, leaving) in enumerate(states):
        p = pod(f"chat-{n}", state)
        if leaving:
            p["metadata"]["deletionTimestamp"] = "2026-12-02T10:00:00Z"
        pods.append(p)
    expected = sum(1 for state, leaving in states if state == "unschedulable" and not leaving)
    assert count_unschedulable(pods) == expected
    deployment = {"spec": {"replicas": len(pods)}, "status": {}}
    view = build_fleet_view(deployment, pods)
    assert view is not None and view.unschedulable == expected
