"""API-server admission: --max-num-queued-reqs/-tokens (docs/vllm-0.33-scheduler.md §5)."""

from __future__ import annotations

import pytest

from vllm_operator.sim.engine import InvalidRequestError, Rejected
from vllm_operator.sim.engine.request import BACKLOG_MESSAGE, BUSY_MESSAGE

from .helpers import STEP, req, tiny_engine

BUSY = Rejected("max_num_queued_reqs", BUSY_MESSAGE)
BACKLOG = Rejected("max_num_queued_tokens", BACKLOG_MESSAGE)


def test_request_cap_counts_unfinished_requests_and_n() -> None:
    engine = tiny_engine(max_num_queued_reqs=3).engine
    assert engine.submit(req("a", 10, 5), 0.0) is None
    assert engine.submit(req("b", 10, 5), 0.0) is None
    # 2 unfinished + n=2 > 3: refused; n=1 makes exactly 3, which is allowed
    assert engine.submit(req("c", 10, 5, n=2), 0.0) == BUSY
    assert engine.submit(req("d", 10, 5), 0.0) is None
    assert engine.submit(req("e", 10, 5), 0.0) == BUSY
    # running requests still count until their final output: a, b, d end at 5 steps
    engine.advance(4 * STEP)
    assert engine.submit(req("f", 10, 5), 4 * STEP) == BUSY
    engine.advance(5 * STEP)
    assert engine.submit(req("f", 10, 5), 5 * STEP) is None
    stats = engine.stats()
    assert stats.rejections == {"max_num_queued_reqs": 3, "max_num_queued_tokens": 0}
    assert stats.frontend_unfinished == 1


def test_token_cap_counts_prompts_before_their_first_output_without_the_incoming_one() -> None:
    engine = tiny_engine(
        max_num_queued_tokens=1000, max_num_batched_tokens=2048, max_model_len=8192
    ).engine
    assert engine.submit(req("a", 900, 50), 0.0) is None
    # 900 < 1000: a 5000-token prompt is still admitted, its own tokens are not added
    assert engine.submit(req("b", 5000, 50, n=1), 0.0) is None
    assert engine.submit(req("c", 10, 5), 0.0) == BACKLOG
    assert engine.stats().frontend_prefill_tokens == 5900
    # a gets its first token at 10 ms; b's 5000-token prompt needs 3 steps (2048 budget)
    engine.advance(STEP)
    assert engine.stats().frontend_prefill_tokens == 5000
    assert engine.submit(req("c", 10, 5), STEP) == BACKLOG
    engine.advance(3 * STEP)
    # both still decoding, but no longer "in prefill": the backlog is empty
    assert engine.stats().frontend_prefill_tokens == 0
    assert engine.submit(req("c", 10, 5), 3 * STEP) is None


def test_request_check_comes_first_and_zero_caps_refuse_everything() -> None:
    engine = tiny_engine(max_num_queued_reqs=1, max_num_queued_tokens=10).engine
    assert engine.submit(req("a", 100, 5), 0.0) is None
    # over both limits: one rejection, under the request limit's reason
    assert engine.submit(req("b", 100, 5), 0.0) == BUSY
    assert engine.stats().rejections == {"max_num_queued_reqs": 1, "max_num_queued_tokens": 0}
    zero = tiny_engine(max_num_queued_tokens=0).engine
    assert zero.submit(req("a", 1, 1), 0.0) == BACKLOG


def test_n_children_count_n_prompts_in_the_token_backlog() -> None:
    engine = tiny_engine(max_num_queued_tokens=250).engine
    assert engine.submit(req("a", 100, 5, n=3), 0.0) is None
    assert engine.stats().frontend_prefill_tokens == 300
    assert engine.submit(req("b", 1, 1), 0.0) == BACKLOG


def test_invalid_requests_are_400_not_503_and_only_after_admission() -> None:
    engine = tiny_engine(max_model_len=128).engine
    with pytest.raises(InvalidRequestError, match=r"prompt \(length 128\) is longer than"):
        engine.submit(req("a", 128, 1), 0.0)
    full = tiny_engine(max_model_len=128, max_num_queued_reqs=0).engine
    assert full.submit(req("a", 128, 1), 0.0) == BUSY  # the 503 check runs before validation


def test_max_tokens_is_capped_by_max_model_len() -> None:
    run = tiny_engine(max_model_len=128)
    engine = run.engine
    engine.submit(req("a", 100, 500), 0.0)
    events = []
    while (t := engine.next_event_time()) is not None:
        events += engine.advance(t)
    record = next(e.record for e in events if e.record is not None)
    assert record.output_tokens == 28  # 100 + 28 = max_model_len
    assert record.finish_reason == "length"


def test_abort_frees_the_request_and_records_nothing() -> None:
    run = tiny_engine(max_num_queued_reqs=1)
    engine = run.engine
    engine.submit(req("a", 10, 100), 0.0)
    engine.advance(3 * STEP)
    engine.abort("a", 3 * STEP)
    assert engine.submit(req("b", 10, 2), 3 * STEP) is None  # the slot came back at once
    events = engine.advance(1.0)
    assert [e.request_id for e in events if e.kind == "finished"] == ["b"]
    stats = engine.stats()
    assert stats.request_success["length"] == 1
    assert stats.frontend_unfinished == 0
