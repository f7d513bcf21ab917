"""Passes of one VLLMService never overlap; passes of different ones do not wait for each other."""

from __future__ import annotations

import gc
import threading

from vllm_operator.handlers import reconcile as r


def test_a_second_pass_of_the_same_service_waits_for_the_first() -> None:
    inside, release, order = threading.Event(), threading.Event(), []

    def first() -> None:
        with r.one_pass_at_a_time("ns", "chat"):
            inside.set()
            release.wait(5)
            order.append("first done")

    def second() -> None:
        with r.one_pass_at_a_time("ns", "chat"):
            order.append("second in")

    t1 = threading.Thread(target=first)
    t1.start()
    assert inside.wait(5)
    t2 = threading.Thread(target=second)
    t2.start()
    t2.join(0.2)
    assert t2.is_alive() and order == []  # blocked while the first pass runs
    release.set()
    t1.join(5)
    t2.join(5)
    assert order == ["first done", "second in"]


def test_other_services_and_nested_passes_do_not_wait() -> None:
    done = threading.Event()

    def other() -> None:
        with r.one_pass_at_a_time("ns", "code"):
            done.set()

    # reconcile_by_name holds the lock and calls reconcile, which takes it again
    with r.one_pass_at_a_time("ns", "chat"), r.one_pass_at_a_time("ns", "chat"):
        threading.Thread(target=other).start()
        assert done.wait(5)


def test_no_lock_outlives_its_passes() -> None:
    with r.one_pass_at_a_time("ns", "gone"):
        assert ("ns", "gone") in r._locks
    gc.collect()
    assert ("ns", "gone") not in r._locks
