"""Which VLLMServices the e2e harness keeps a balancer for, and what counts as a running pod."""

from __future__ import annotations

from typing import Any

from vllm_operator import constants as c
from vllm_twin.harness.targets import (
    balancer_keys,
    build_pod_status,
    is_running,
    restart_delay,
    service_key,
    termination_times,
)


def obj(
    name: str, *, service: str | None = "chat", ns: str = "team-a", **meta: Any
) -> dict[str, Any]:
    labels = {c.LABEL_SERVICE: service} if service else {}
    return {"metadata": {"name": name, "namespace": ns, "labels": labels, **meta}}


def pod(name: str, phase: str = "Running", **meta: Any) -> dict[str, Any]:
    return {**obj(name, **meta), "status": {"phase": phase}}


def test_service_key_is_namespace_and_vllmservice_name() -> None:
    assert service_key(obj("chat-abc", service="chat", ns="team-b")) == "team-b/chat"
    assert service_key(obj("other", service=None)) is None


def test_a_pod_counts_as_running_only_in_phase_running_and_not_terminating() -> None:
    assert is_running(pod("p"))
    assert not is_running(pod("p", phase="Pending"))
    assert not is_running(pod("p", deletionTimestamp="2026-11-29T00:00:00Z"))


def test_the_balancer_outlives_a_moment_without_running_pods() -> None:
    # maxSurge 0: the old pod is gone before the new one runs; the Service is still there.
    assert balancer_keys([obj("chat")], []) == {"team-a/chat"}


def test_a_pod_without_its_service_still_gets_a_balancer() -> None:
    assert balancer_keys([], [pod("solo-1", service="solo")]) == {"team-a/solo"}


def test_no_balancer_once_service_and_pods_are_gone_or_going() -> None:
    going = obj("chat", deletionTimestamp="2026-11-29T00:00:00Z")
    assert balancer_keys([going], []) == set()
    assert balancer_keys([obj("unlabelled", service=None)], []) == set()


def vllm_pod() -> dict[str, Any]:
    p = pod("chat-1")
    p["spec"] = {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.33.0"}]}
    return p


def test_a_crashed_twin_is_reported_as_a_kubelet_reports_a_crash_loop() -> None:
    body = build_pod_status(vllm_pod(), up=False, restarts=2, exit_code=-9, now="T")
    assert body["metadata"] == {"name": "chat-1", "namespace": "team-a"}
    status = body["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Ready": "False",
        "ContainersReady": "False",
    }
    (cs,) = status["containerStatuses"]
    assert cs["name"] == "vllm" and cs["restartCount"] == 2 and cs["ready"] is False
    assert cs["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert cs["lastState"]["terminated"]["exitCode"] == 137  # SIGKILL, as a runtime says it


def test_a_restarted_twin_makes_the_pod_ready_again() -> None:
    body = build_pod_status(vllm_pod(), up=True, restarts=2, exit_code=-9, now="T")
    (cs,) = body["status"]["containerStatuses"]
    assert cs["ready"] is True and cs["state"] == {"running": {"startedAt": "T"}}
    assert {c["status"] for c in body["status"]["conditions"]} == {"True"}


def test_restarts_back_off_doubling_to_a_cap() -> None:
    assert [restart_delay(n) for n in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_termination_times_are_the_pods_on_the_twins_time_scale() -> None:
    container = {"name": "vllm", "lifecycle": {"preStop": {"sleep": {"seconds": 5}}}}
    rendered = {"spec": {"containers": [container], "terminationGracePeriodSeconds": 80}}
    assert termination_times(rendered, 1.0) == (5.0, 80.0)
    assert termination_times(rendered, 10.0) == (0.5, 8.0)
    # no hook, no grace period: Kubernetes' 30 s
    assert termination_times({"spec": {"containers": [{"name": "vllm"}]}}, 1.0) == (0.0, 30.0)
