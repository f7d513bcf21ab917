"""handlers/children.py on a real pool: a pass's children go in side by side, the Deployment
among them, and an Event that cannot be posted costs the pass nothing."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.component.handlers import LOG, deps_for, example, roll_out, service
from tests.support.fake_kube import FakeKube
from vllm_operator import constants as c
from vllm_operator.handlers.reconcile import reconcile

NOW = datetime(2026, 12, 1, 21, tzinfo=UTC)


class MeetingKube(FakeKube):
    """Holds the Deployment, Service and ServiceMonitor applies until all three are in flight: a
    pass that applies one after another breaks the barrier (its timeout only ends a hung test)."""

    def __init__(self) -> None:
        super().__init__()
        self.meet = threading.Barrier(3, timeout=30)
        self.order: list[str] = []
        self.guard = threading.Lock()

    def apply(self, obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if obj["kind"] in ("Deployment", "Service", "ServiceMonitor"):
            self.meet.wait()
        with self.guard:
            self.order.append(obj["kind"])
            return super().apply(obj, **kw)


def test_the_deployment_service_and_monitor_are_applied_at_once() -> None:
    kube = MeetingKube()
    kube.put(example("three-layer-budgets.yaml"))
    deps = deps_for(kube, NOW)
    with ThreadPoolExecutor(max_workers=2) as pool:
        deps.children = pool
        reconcile(service(kube), deps=deps, logger=LOG)
    children = [k for k in kube.order if k != c.KIND]
    assert sorted(children) == ["Deployment", "Service", "ServiceMonitor"]
    assert service(kube)["status"]["observedGeneration"] == 1


class NoEvents(FakeKube):
    def emit_event(self, involved: dict[str, Any], **kw: Any) -> None:
        raise ConnectionResetError("the API server closed the connection")


def test_an_event_that_cannot_be_posted_is_logged_and_does_not_fail_the_pass(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kube = NoEvents()
    kube.put(example("minimal.yaml"))
    deps = deps_for(kube, NOW)
    reconcile(service(kube), deps=deps, logger=LOG)
    roll_out(kube)
    reconcile(service(kube), deps=deps, logger=LOG)  # Ready=True: its Event is refused
    ready = next(x for x in service(kube)["status"]["conditions"] if x["type"] == c.COND_READY)
    assert ready["status"] == "True"
    assert "cannot post the ReplicasAvailable Event of team-a/chat" in caplog.text
