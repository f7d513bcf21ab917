"""Preemption by recompute and the priority policy (docs/vllm-0.33-scheduler.md §1.6, §3).

All pools here have 12 blocks of 16 tokens, 11 of them usable (one is vLLM's null block).
"""

from __future__ import annotations

import pytest

from .helpers import STEP, drive, req, tiny_engine

TIGHT = {"num_gpu_blocks_override": 12, "max_num_seqs": 4, "max_num_batched_tokens": 256}


def test_fcfs_example_of_the_reference() -> None:
    # §3 [run]: three 48-token prompts in 11 blocks
    run = drive(
        tiny_engine(**TIGHT),
        [(0.0, req("r1", 48, 60)), (0.0, req("r2", 48, 60)), (0.0, req("r3", 48, 60))],
    )
    steps = run.step_tokens()
    assert steps[0] == {"r1": 48, "r2": 48, "r3": 48}  # 9 blocks
    # step 1: r1 and r2 take the last 2 blocks for their 49th token; r3 preempts itself
    assert steps[1] == {"r1": 1, "r2": 1}
    # step 17: both take a 5th block from the 3 r3 freed; step 33: r1 takes the last one for its
    # 6th and r2, now last in running order, preempts itself
    assert steps[32] == {"r1": 1, "r2": 1}
    assert steps[33] == {"r1": 1}
    # r1 finishes at the end of step 59; r2 (48+33 tokens to recompute) and r3 (48+1) resume
    # together in step 60, r2 first: it went back to the front of the queue after r3
    assert list(steps[60].items()) == [("r2", 81), ("r3", 49)]
    # 10 of 11 blocks again: 16 steps later both need a block, r2 (ahead) gets the last
    # one and r3, last in running order, preempts itself a second time
    assert steps[75] == {"r2": 1, "r3": 1}
    assert steps[76] == {"r2": 1}
    records = run.records()
    preemptions = [records[r].preemptions for r in ("r1", "r2", "r3")]
    assert preemptions == [0, 1, 2]
    assert records["r3"].scheduled == 0.0  # queue time counts the first admission only
    assert records["r2"].output_tokens == 60  # outputs are kept and re-prefilled, not lost
    assert run.engine.stats().preemptions == 3


def test_recomputed_tokens_are_prefilled_again() -> None:
    run = drive(
        tiny_engine(**TIGHT),
        [(0.0, req("r1", 48, 60)), (0.0, req("r2", 48, 60)), (0.0, req("r3", 48, 60))],
    )
    recomputed = sum(step.get("r2", 0) for step in run.step_tokens())
    # first prefill 48 + 32 decodes, then prompt + 33 outputs again, then 26 more decodes
    assert recomputed == 48 + 32 + 81 + 26
    # the preemption counter moves with the victim's next output, not at preemption (§6.2)
    assert run.engine.stats().prompt_tokens == 3 * 48  # counted once, at the first output


def test_priority_preempts_its_lowest_priority_and_admits_nothing_that_step() -> None:
    run = drive(
        tiny_engine(**TIGHT, scheduling_policy="priority"),
        [
            (0.0, req("A", 64, 20, priority=0)),  # 4 blocks
            (0.0, req("B", 96, 20, priority=1)),  # 6 blocks
            (0.005, req("C", 16, 5, priority=0)),  # 1 block, arrives during step 0
        ],
    )
    steps = run.step_tokens()
    assert steps[0] == {"A": 64, "B": 96}
    # step 1: A takes the last block; B needs one and is itself the lowest priority: preempted.
    # C fits in B's 6 freed blocks but no admission happens in a step with a preemption.
    assert steps[1] == {"A": 1}
    assert steps[2] == {"A": 1, "C": 16}
    records = run.records()
    assert records["C"].scheduled == pytest.approx(2 * STEP)
    assert records["B"].preemptions == 1


def test_priority_victim_scheduled_earlier_in_the_step_gives_its_budget_back() -> None:
    run = drive(
        tiny_engine(**TIGHT, scheduling_policy="priority"),
        [(0.0, req("L", 32, 30, priority=2)), (0.005, req("H", 128, 30, priority=0))],
    )
    steps = run.step_tokens()
    assert steps[1] == {"L": 1, "H": 128}  # L takes its 3rd block, H its 8: pool full
    # step 2: L (first in running order) is scheduled, then H needs a 9th block: the victim
    # is max (priority, arrival) = L, already in this step; its token is refunded
    assert steps[2] == {"H": 1}
    assert run.records()["L"].preemptions == 1
    assert run.records()["H"].preemptions == 0


def test_priority_orders_waiting_and_never_preempts_for_arrivals() -> None:
    run = drive(
        tiny_engine(**TIGHT, scheduling_policy="priority"),
        [
            (0.0, req("lo1", 64, 10, priority=5)),
            (0.0, req("lo2", 64, 10, priority=5)),  # 8 blocks with lo1: 3 free
            (0.005, req("mid", 60, 2, priority=3)),  # needs 4 blocks
            (0.006, req("hi", 60, 2, priority=0)),  # needs 4 blocks, arrives after mid
        ],
    )
    records = run.records()
    # nobody is preempted for the waiting high-priority request (§1.3 step 9 [run])
    assert run.engine.stats().preemptions == 0
    # when the low-priority pair finishes, hi goes before mid despite arriving later
    assert records["hi"].scheduled == pytest.approx(records["lo1"].finished)
    assert records["mid"].scheduled >= records["hi"].scheduled
    first_with_hi = next(s for s in run.step_tokens() if "hi" in s)
    assert list(first_with_hi) == ["hi", "mid"]
