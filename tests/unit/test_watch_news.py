"""main.status_submitters: what the pod and Deployment watches' news passes, and when."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from tests.support.fake_kube import FakeKube
from vllm_operator.handlers.children import Seen
from vllm_operator.handlers.leader import LeaseGate
from vllm_operator.k8s.versions import NewestCopies
from vllm_operator.main import pass_all, status_submitters

KEY = ("team-a", "chat")
PODS = [{"metadata": {"name": "chat-0"}}]


def memo(active: bool) -> tuple[Any, list[tuple[tuple[str, str], Seen]]]:
    submitted: list[tuple[tuple[str, str], Seen]] = []
    found = SimpleNamespace(
        active=lambda: active,
        pods=SimpleNamespace(pods_of=lambda key: PODS if key == KEY else None),
        status_passes=SimpleNamespace(submit=lambda key, seen: submitted.append((key, seen))),
        deps=SimpleNamespace(deployments=NewestCopies()),
    )
    return found, submitted


def test_a_deployment_event_passes_its_service_with_the_deployment_and_the_pods() -> None:
    m, submitted = memo(active=True)
    stuck, changed = status_submitters(m)
    deployment = {"metadata": {"name": "chat", "namespace": "team-a", "resourceVersion": "7"}}
    changed(KEY, deployment)
    changed(KEY, None)  # deleted: the pass finds it gone
    stuck(KEY)
    assert m.deps.deployments.copy_of(*KEY) == deployment  # a pass under way reports it
    only = frozenset({"Deployment"})
    assert submitted == [
        (KEY, Seen({"Deployment": deployment}, pods=PODS, only=only)),
        (KEY, Seen({}, pods=PODS, only=only)),
        (KEY, Seen({}, pods=PODS, only=only)),
    ]


def test_a_standby_replica_passes_nothing_and_keeps_the_newest_deployment() -> None:
    m, submitted = memo(active=False)
    stuck, changed = status_submitters(m)
    deployment = {"metadata": {"name": "chat", "namespace": "team-a", "resourceVersion": "9"}}
    changed(KEY, deployment)
    stuck(KEY)
    assert submitted == []
    assert m.deps.deployments.copy_of(*KEY) == deployment


def test_a_replica_that_starts_holding_the_lease_passes_every_known_deployment() -> None:
    class Known:
        def newest(self) -> list[tuple[tuple[str, str], dict[str, Any]]]:
            return [(KEY, {"metadata": {"name": "chat"}}), (("team-b", "x"), {"metadata": {}})]

    passed: list[tuple[str, str]] = []
    gate = LeaseGate(FakeKube(), "ops", "loops", identity="me")
    gate.on_hold = lambda: pass_all([Known()], lambda key, _d: passed.append(key))  # type: ignore[list-item]
    now = datetime(2026, 12, 5, tzinfo=UTC)
    assert gate.try_hold(now)
    assert passed == [KEY, ("team-b", "x")]
    assert gate.try_hold(now + timedelta(seconds=10))  # a renewal catches nothing up
    assert passed == [KEY, ("team-b", "x")]
    rival = LeaseGate(gate.kube, "ops", "loops", identity="other")
    rival.on_hold = lambda: passed.append(("rival", "held"))
    assert not rival.try_hold(now + timedelta(seconds=20))  # a live holder keeps it
    assert passed == [KEY, ("team-b", "x")]
