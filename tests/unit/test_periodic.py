"""handlers/periodic.py: the tuning loop hands services to a PassQueue, so one slow pass holds
back no other service's."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any, cast

from vllm_operator.handlers.passes import PassQueue
from vllm_operator.handlers.periodic import run_periodically, submit_to

SLOW = ("ns", "slow")


def test_a_slow_service_holds_back_no_other_and_never_runs_twice_at_once() -> None:
    release = threading.Event()
    lock = threading.Lock()
    others = threading.Condition(lock)
    started: list[tuple[str, str]] = []
    running: dict[tuple[str, str], int] = {}
    most_at_once: dict[tuple[str, str], int] = {}

    def run(key: tuple[str, str], body: dict[str, Any]) -> None:
        with lock:
            started.append(key)
            running[key] = running.get(key, 0) + 1
            most_at_once[key] = max(most_at_once.get(key, 0), running[key])
        if key == SLOW:  # a cold model evaluation, an API call waiting out its timeout
            release.wait(30)
        with lock:
            running[key] -= 1
            others.notify_all()

    queue = PassQueue("tune", 4, run, lambda _delay, _fn: None)
    bodies = [{"metadata": {"namespace": "ns", "name": n}} for n in ("slow", "a", "b")]
    deps = cast(Any, SimpleNamespace(kube=SimpleNamespace(list=lambda *_: bodies)))

    def others_ran(count: int) -> bool:
        with others:
            return others.wait_for(lambda: sum(1 for k in started if k != SLOW) >= count, 30)

    async def periods() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(run_periodically("tune", 0.03, deps, (), submit_to(queue), stop))
        # several periods of the other two while the first one's pass still blocks
        assert await asyncio.to_thread(others_ran, 6)
        stop.set()
        await task

    try:
        asyncio.run(periods())
        assert started.count(SLOW) == 1  # the later periods' passes wait behind it: one, newest
    finally:
        release.set()
    queue.pool.shutdown(wait=True)
    assert started.count(SLOW) == 2  # the one waiting pass ran once the first was done
    assert max(most_at_once.values()) == 1
