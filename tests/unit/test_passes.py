"""handlers/passes.py: one waiting pass per service, pools that do not wait for each other,
retries with back-off that a newer submit supersedes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_operator.handlers.passes import PassQueue, retry_delay
from vllm_operator.handlers.reconcile import spec_unreconciled


class Later:
    """Records what the queue schedules; the test decides when it fires."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, Callable[[], None]]] = []
        self.scheduled = threading.Semaphore(0)

    def __call__(self, delay: float, fn: Callable[[], None]) -> None:
        self.calls.append((delay, fn))
        self.scheduled.release()


class Gate:
    """A pass that blocks on a key until released, recording (key, arg) as it starts."""

    def __init__(self, fail: int = 0) -> None:
        self.started: list[tuple[Any, Any]] = []
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()
        self.done = threading.Semaphore(0)
        self.fail = fail

    def __call__(self, key: Any, arg: Any) -> None:
        self.started.append((key, arg))
        self.entered.release()
        try:
            assert self.release.wait(5)
            if self.fail:
                self.fail -= 1
                raise RuntimeError("refused")
        finally:
            self.done.release()


def drain(queue: PassQueue) -> None:
    queue.pool.shutdown(wait=True)


def test_submits_while_a_pass_waits_fold_into_it_with_the_newest_argument() -> None:
    gate = Gate()
    queue = PassQueue("t", 1, gate, Later())
    queue.submit("a", 1)
    assert gate.entered.acquire(timeout=5)  # "a" runs and holds the only worker
    for arg in (2, 3, 4):
        queue.submit("b", arg)
    gate.release.set()
    drain(queue)
    assert gate.started == [("a", 1), ("b", 4)]


def test_a_submit_during_its_own_pass_gets_one_more_pass() -> None:
    gate = Gate()
    queue = PassQueue("t", 2, gate, Later())
    queue.submit("a", 1)
    assert gate.entered.acquire(timeout=5)
    queue.submit("a", 2)  # the running pass may have read the world before this change
    gate.release.set()
    drain(queue)
    assert gate.started == [("a", 1), ("a", 2)]


def test_a_queue_runs_while_another_is_full() -> None:
    slow, quick = Gate(), Gate()
    quick.release.set()
    specs, statuses = PassQueue("spec", 1, slow, Later()), PassQueue("status", 1, quick, Later())
    specs.submit("a", None)
    assert slow.entered.acquire(timeout=5)
    statuses.submit("b", "seen")
    assert quick.done.acquire(timeout=5)  # while the spec pass still blocks its pool
    assert quick.started == [("b", "seen")]
    slow.release.set()
    drain(specs)
    drain(statuses)


def test_a_failed_pass_is_retried_with_back_off_and_reads_the_object_again() -> None:
    gate, later = Gate(fail=2), Later()
    gate.release.set()
    queue = PassQueue("t", 1, gate, later)
    queue.submit("a", "event body")
    for _ in range(2):
        assert later.scheduled.acquire(timeout=5)
        later.calls[-1][1]()  # the retry fires
    drain(queue)
    assert [d for d, _ in later.calls] == [retry_delay(1), retry_delay(2)]
    assert gate.started == [("a", "event body"), ("a", None), ("a", None)]
    assert queue.failures == {} and queue.submits == {}


def test_a_retry_is_dropped_when_a_newer_submit_came_in() -> None:
    gate, later = Gate(fail=1), Later()
    gate.release.set()
    queue = PassQueue("t", 1, gate, later)
    queue.submit("a", 1)
    assert gate.done.acquire(timeout=5)
    queue.submit("a", 2)
    assert gate.done.acquire(timeout=5)
    drain(queue)
    (_, retry), *_ = later.calls
    started = list(gate.started)
    retry()  # the pool is shut down: a pass submitted now would raise
    assert started == [("a", 1), ("a", 2)] == gate.started


@settings(derandomize=True, max_examples=50, deadline=None)
@given(st.integers(min_value=1, max_value=40))
def test_back_off_doubles_up_to_a_minute(failures: int) -> None:
    delay = retry_delay(failures)
    assert 1.0 <= delay <= 60.0
    assert retry_delay(failures + 1) == min(60.0, 2 * delay)


def test_a_spec_is_unreconciled_until_status_reports_its_generation() -> None:
    body: dict[str, Any] = {"metadata": {"generation": 2}}
    assert spec_unreconciled(body)
    body["status"] = {"observedGeneration": 1}
    assert spec_unreconciled(body)
    body["status"] = {"observedGeneration": 2}
    assert not spec_unreconciled(body)


class Overlap:
    """A pass that records, per key, how many run at once and the order they finish in."""

    def __init__(self, pause: Callable[[Any], None] = lambda arg: None) -> None:
        self.guard = threading.Lock()
        self.running: dict[Any, int] = {}
        self.most: dict[Any, int] = {}
        self.finished: list[tuple[Any, Any]] = []
        self.pause = pause

    def __call__(self, key: Any, arg: Any) -> None:
        with self.guard:
            self.running[key] = self.running.get(key, 0) + 1
            self.most[key] = max(self.most.get(key, 0), self.running[key])
        self.pause(arg)
        with self.guard:
            self.running[key] -= 1
            self.finished.append((key, arg))


def test_passes_of_one_key_never_overlap_so_the_newest_argument_finishes_last() -> None:
    # CI, stop 31: two status passes of one service ran at once; the one with the older
    # Deployment wrote last and Ready went back to False for good.
    first_in, first_go = threading.Event(), threading.Event()

    def pause(arg: Any) -> None:
        if arg == 1:
            first_in.set()
            assert first_go.wait(5)

    passes = Overlap(pause)
    queue = PassQueue("t", 4, passes, Later())
    queue.submit("a", 1)
    assert first_in.wait(5)
    queue.submit("a", 2)  # three idle workers: none may take "a" while its first pass runs
    queue.submit("b", 1)  # another key does not wait for "a"
    first_go.set()
    drain(queue)
    assert passes.most == {"a": 1, "b": 1}
    assert [arg for key, arg in passes.finished if key == "a"] == [1, 2]
    assert queue.busy == set() and queue.waiting == {}


@settings(derandomize=True, max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 3)), min_size=1, max_size=30),
    st.integers(min_value=1, max_value=4),
)
def test_the_last_pass_of_each_key_to_finish_has_its_newest_argument(
    submits: list[tuple[str, int]], workers: int
) -> None:
    import time

    # the pause only shuffles how passes interleave; nothing below depends on its length
    passes = Overlap(lambda arg: time.sleep((arg % 4) / 2000))
    queue = PassQueue("t", workers, passes, Later())
    for n, (key, pause) in enumerate(submits):
        queue.submit(key, pause + 4 * n)  # distinct arguments, each with its pause
    drain(queue)
    assert all(most == 1 for most in passes.most.values()), passes.most
    newest = {key: pause + 4 * n for n, (key, pause) in enumerate(submits)}
    last = {key: arg for key, arg in passes.finished}
    assert last == newest
    assert queue.busy == set() and queue.submits == {}
