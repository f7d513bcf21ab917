"""What the reconcile reads from a service's pods: the kubelet's crash-loop back-off."""

from __future__ import annotations

from typing import Any

from vllm_operator.handlers.reconcile import crash_loop_message


def pod(waiting: str | None = None, restarts: int = 0, exit_code: int | None = None) -> Any:
    status: dict[str, Any] = {"name": "vllm", "restartCount": restarts, "state": {}}
    if waiting:
        status["state"] = {"waiting": {"reason": waiting}}
    if exit_code is not None:
        status["lastState"] = {"terminated": {"exitCode": exit_code}}
    return {"status": {"containerStatuses": [status]}}


def test_a_container_in_back_off_is_named_with_its_restarts_and_exit_code() -> None:
    pods = [pod(), pod("CrashLoopBackOff", restarts=3, exit_code=137)]
    assert crash_loop_message(pods) == (
        "1/2 pods crash-looping: container vllm restarted 3 times, last exit code 137"
    )


def test_other_waits_and_running_containers_are_no_crash_loop() -> None:
    assert crash_loop_message([pod(), pod("ContainerCreating")]) is None
    assert crash_loop_message([{"status": {}}]) is None
    assert crash_loop_message([]) is None
