"""handlers/children.py on a real pool: a pass's children go in side by side, the Deployment
among them, and an Event that cannot be posted costs the pass nothing."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.component.handlers import LOG, deployment, deps_for, example, roll_out, service
from tests.support.fake_kube import FakeKube
from vllm_operator import constants as c
from vllm_operator.handlers.reconcile import reconcile
from vllm_operator.k8s.versions import NewestCopies

NOW = datetime(2026, 12, 1, 21, tzinfo=UTC)


class ThreadsOf(FakeKube):
    """Notes each apply's kind and the thread that made it, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.order: list[tuple[str, str]] = []
        self.guard = threading.Lock()

    def apply(self, obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
        with self.guard:
            self.order.append((obj["kind"], threading.current_thread().name))
            return super().apply(obj, **kw)


class MeetingKube(ThreadsOf):
    """Holds the Deployment, Service and ServiceMonitor applies until all three are in flight: a
    pass that applies one after another breaks the barrier (its timeout only ends a hung test)."""

    def __init__(self) -> None:
        super().__init__()
        self.meet = threading.Barrier(3, timeout=30)

    def apply(self, obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if obj["kind"] in ("Deployment", "Service", "ServiceMonitor"):
            self.meet.wait()
        return super().apply(obj, **kw)


def pass_on_pools(kube: FakeKube, file: str) -> None:
    """One pass of examples/`file`, its children and its Service on pools as in the operator."""
    kube.put(example(file))
    deps = deps_for(kube, NOW)
    with (
        ThreadPoolExecutor(2, thread_name_prefix="children") as pool,
        ThreadPoolExecutor(1, thread_name_prefix="services") as services,
    ):
        deps.children, deps.service_applies = pool, services
        reconcile(service(kube), deps=deps, logger=LOG)


def test_the_deployment_service_and_monitor_are_applied_at_once() -> None:
    kube = MeetingKube()
    pass_on_pools(kube, "three-layer-budgets.yaml")
    children = [k for k, _ in kube.order if k != c.KIND]
    assert sorted(children) == ["Deployment", "Service", "ServiceMonitor"]
    assert service(kube)["status"]["observedGeneration"] == 1


@pytest.mark.parametrize("example_file", ["minimal.yaml", "three-layer-budgets.yaml"])
def test_a_service_is_applied_on_its_own_pool_whatever_else_is_rendered(
    example_file: str,
) -> None:
    """Services queue in the API server, so they go a few at a time (deps.service_applies),
    also when they are the last child rendered (no monitor), which the pass would otherwise
    apply on its own thread."""
    kube = ThreadsOf()
    pass_on_pools(kube, example_file)
    threads = dict(kube.order)
    assert threads["Service"].startswith("services")
    assert not threads["Deployment"].startswith("services")
    assert service(kube)["status"]["observedGeneration"] == 1


class RefusedService(FakeKube):
    def apply(self, obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if obj["kind"] == "Service":
            raise ApiException(status=403, reason="Forbidden")
        return super().apply(obj, **kw)


def test_a_refused_service_fails_the_pass_after_the_other_children_are_in() -> None:
    kube = RefusedService()
    with pytest.raises(ApiException):
        pass_on_pools(kube, "three-layer-budgets.yaml")
    assert kube.get("apps/v1", "Deployment", "team-a", "chat") is not None
    assert kube.get("monitoring.coreos.com/v1", "ServiceMonitor", "team-a", "chat") is not None
    ready = next(x for x in service(kube)["status"]["conditions"] if x["type"] == c.COND_READY)
    assert ready["reason"] == c.REASON_APPLY_FAILED


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


class ReadyWhileTheServiceWaits(FakeKube):
    """The Deployment's pods become ready while the pass waits for its Service, and the
    Deployment watch notes it (main.status_submitters) before the pass writes status."""

    def __init__(self, noted: NewestCopies) -> None:
        super().__init__()
        self.noted = noted

    def apply(self, obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
        stored = super().apply(obj, **kw)
        if obj["kind"] == "Service":
            roll_out(self)
            self.noted.note(deployment(self))
        return stored


def test_a_create_whose_pods_became_ready_meanwhile_says_ready_in_one_status_write() -> None:
    deps = deps_for(FakeKube(), NOW)
    kube = deps.kube = ReadyWhileTheServiceWaits(deps.deployments)
    kube.put(example("three-layer-budgets.yaml"))
    reconcile(service(kube), deps=deps, logger=LOG)
    assert len(kube.applied(c.KIND, subresource="status")) == 1
    ready = next(x for x in service(kube)["status"]["conditions"] if x["type"] == c.COND_READY)
    assert (ready["status"], ready["reason"]) == ("True", c.REASON_AVAILABLE)
    assert service(kube)["status"]["readyReplicas"] == 2


def test_a_deployment_noted_before_the_pass_applied_it_is_not_reported() -> None:
    """An older copy (a previous rollout's) never replaces what the pass just applied."""
    kube = FakeKube()
    deps = deps_for(kube, NOW)
    kube.put(example("three-layer-budgets.yaml"))
    reconcile(service(kube), deps=deps, logger=LOG)
    roll_out(kube)
    deps.deployments.note(deployment(kube))  # ready, at this version
    edited = service(kube)
    edited["spec"]["engine"] = {**edited["spec"].get("engine", {}), "maxModelLen": 4096}
    kube.put(edited)  # a new generation: the pass applies a new template
    reconcile(service(kube), deps=deps, logger=LOG)
    ready = next(x for x in service(kube)["status"]["conditions"] if x["type"] == c.COND_READY)
    assert ready["status"] == "False"
