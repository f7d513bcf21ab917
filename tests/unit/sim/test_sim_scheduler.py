"""schedule() semantics on hand-computable scenarios (docs/vllm-0.33-scheduler.md §1).

Sync scheduling and a constant 10 ms step unless a test says otherwise (helpers.py), so step k
of a busy engine runs from k*10ms to (k+1)*10ms and is scheduled at its start.
"""

from __future__ import annotations

import pytest

from .helpers import STEP, drive, req, tiny_engine


def test_token_budget_split_between_decodes_and_prefill_chunks() -> None:
    run = drive(
        tiny_engine(max_num_batched_tokens=64, max_num_seqs=4),
        [(0.0, req("A", 20, 10)), (0.0, req("B", 150, 5))],
    )
    # A's whole prompt and B's first chunk share step 0; then A's decode comes first in
    # running order and B's chunks take what is left: 63, then the last 43 tokens
    assert run.step_tokens()[:5] == [
        {"A": 20, "B": 44},
        {"A": 1, "B": 63},
        {"A": 1, "B": 43},
        {"A": 1, "B": 1},
        {"A": 1, "B": 1},
    ]
    records = run.records()
    assert records["A"].first_token == pytest.approx(1 * STEP)
    assert records["B"].first_token == pytest.approx(3 * STEP)  # sampled by the last chunk
    assert records["B"].prefill_time == pytest.approx(3 * STEP)
    assert records["A"].output_tokens == 10
    assert records["A"].finish_reason == "length"
    assert records["A"].finished == pytest.approx(10 * STEP)
    assert records["A"].itls == pytest.approx((STEP,) * 9)


def test_chunked_prefill_off_waits_for_the_whole_prompt() -> None:
    run = drive(
        tiny_engine(
            max_num_batched_tokens=256,
            max_num_seqs=4,
            max_model_len=200,
            enable_chunked_prefill=False,
        ),
        [(0.0, req("A", 150, 3)), (0.0, req("B", 150, 3))],
    )
    # B does not fit in the 106 tokens A leaves, and is not chunked: it waits a step
    assert run.step_tokens()[:2] == [{"A": 150}, {"A": 1, "B": 150}]


def test_long_prefill_threshold_applies_only_with_company() -> None:
    two = drive(
        tiny_engine(max_num_batched_tokens=64, max_num_seqs=4, long_prefill_token_threshold=16),
        [(0.0, req("A", 100, 1)), (0.0, req("B", 100, 1))],
    )
    assert two.step_tokens()[0] == {"A": 16, "B": 16}
    lone = drive(
        tiny_engine(max_num_batched_tokens=64, max_num_seqs=4, long_prefill_token_threshold=16),
        [(0.0, req("A", 100, 1))],
    )
    assert lone.step_tokens()[0] == {"A": 64}


def test_active_seq_cap_admits_the_next_request_only_after_a_finish() -> None:
    run = drive(
        tiny_engine(max_num_seqs=4, max_num_active_seqs=1),
        [(0.0, req("A", 32, 5)), (0.0, req("B", 32, 5))],
    )
    records = run.records()
    # A's last output ends step 4 at 50 ms; its update frees the slot before the next schedule
    assert records["A"].finished == pytest.approx(5 * STEP)
    assert records["B"].scheduled == pytest.approx(records["A"].finished)
    assert all(len(step.tokens) == 1 for step in run.steps)  # never two running


def test_fcfs_head_of_line_blocking_on_kv() -> None:
    # 11 usable blocks of 16 tokens; A holds 7, B needs 5 for its whole prompt, C needs 1
    run = drive(
        tiny_engine(num_gpu_blocks_override=12, max_num_seqs=4, max_num_batched_tokens=256),
        [(0.0, req("A", 100, 40)), (0.0, req("B", 80, 2)), (0.0, req("C", 10, 2))],
    )
    records = run.records()
    assert run.step_tokens()[0] == {"A": 100}
    # C would fit but never passes B (§1.3 step 9); both start once A's blocks come back
    assert records["B"].scheduled == pytest.approx(records["A"].finished)
    assert records["C"].scheduled == records["B"].scheduled
    assert run.engine.stats().preemptions == 0


def test_reserve_full_isl_checks_whole_prompt_not_just_the_first_chunk() -> None:
    flags = {
        "num_gpu_blocks_override": 12,  # 11 usable blocks
        "max_num_seqs": 4,
        "max_num_batched_tokens": 64,
    }
    # A takes 5 blocks; B's 100-token prompt needs 7 > 6 free, though its first chunk needs 3
    full = drive(tiny_engine(**flags), [(0.0, req("A", 80, 1)), (0.005, req("B", 100, 1))])
    assert "B" not in full.step_tokens()[1]
    lax = drive(
        tiny_engine(**flags, scheduler_reserve_full_isl=False),
        [(0.0, req("A", 80, 1)), (0.005, req("B", 100, 1))],
    )
    assert lax.step_tokens()[1] == {"A": 16, "B": 48}


def test_watermark_keeps_blocks_free_only_when_something_runs() -> None:
    flags = {
        "num_gpu_blocks_override": 20,  # 19 usable; watermark int(0.2*20) = 4 blocks
        "max_num_seqs": 4,
        "max_num_batched_tokens": 512,
        "watermark": 0.2,
    }
    # alone, a 17-block prompt is admitted although it leaves only 2 blocks free
    alone = drive(tiny_engine(**flags), [(0.0, req("A", 270, 1))])
    assert alone.step_tokens()[0] == {"A": 270}
    # behind a running 2-block request the same prompt needs 17 + 4 > 17 free: it waits
    behind = drive(tiny_engine(**flags), [(0.0, req("R", 20, 3)), (0.005, req("A", 270, 1))])
    assert "A" not in behind.step_tokens()[1]
    assert behind.records()["A"].scheduled == pytest.approx(behind.records()["R"].finished)
