"""Report maths (percentiles, shares, throughput, goodput) and the 503 retry schedule."""

from __future__ import annotations

import random

import pytest

from vllm_twin.loadgen.backoff import RetryPolicy
from vllm_twin.loadgen.report import (
    Outcome,
    Slo,
    percentile,
    render_table,
    report_to_dict,
    summarize_outcomes,
)


@pytest.mark.parametrize(
    ("q", "expected"), [(0, 1.0), (50, 2.5), (95, 3.85), (99, 3.97), (100, 4.0)]
)
def test_percentile_interpolates_linearly_between_ranks(q: float, expected: float) -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], q) == pytest.approx(expected)


def test_percentile_of_one_value_and_of_none() -> None:
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)


def _ok(start: float, ttft: float, end: float, tokens: int, attempts: int = 1) -> Outcome:
    # chunk gaps consistent with the TTFT and end time: one chunk per token
    gap = (end - start - ttft) / (tokens - 1) if tokens > 1 else 0.0
    return Outcome(
        start=start,
        end=end,
        status=200,
        attempts=attempts,
        rejections=attempts - 1,
        prompt_tokens=100,
        output_tokens=tokens,
        ttft=ttft,
        itls=tuple([gap] * (tokens - 1)),
    )


def test_summary_counts_shares_throughput_and_goodput() -> None:
    outcomes = [
        _ok(0.0, 0.2, 1.1, 10),  # tpot 0.1: misses the 60 ms SLO
        _ok(1.0, 0.1, 1.55, 10),  # tpot 0.05, ttft 0.1: meets it
        _ok(2.0, 0.9, 2.9, 1, attempts=3),  # single token: tpot 0, but ttft 0.9 misses
        Outcome(3.0, 3.5, 503, attempts=2, rejections=2, prompt_tokens=5, output_tokens=0),
        Outcome(4.0, 4.0, None, 1, 0, 5, 0, error="ClientConnectorError"),
    ]
    r = summarize_outcomes(outcomes, Slo(ttft=0.5, tpot=0.06))
    assert (r.requests, r.succeeded, r.rejected, r.errors) == (5, 3, 1, 1)
    assert (r.attempts, r.responses_503, r.retries) == (8, 4, 3)
    assert r.rejection_share == pytest.approx(4 / 8)
    assert r.failed_share == pytest.approx(2 / 5)
    assert r.span_s == pytest.approx(4.0)
    assert r.throughput_rps == pytest.approx(3 / 4)
    assert r.output_tokens_per_s == pytest.approx(21 / 4)
    assert r.goodput_rps == pytest.approx(1 / 4)
    assert r.ttft.count == 3
    assert r.ttft.p50 == pytest.approx(0.2)
    assert r.tpot.mean == pytest.approx((0.1 + 0.05 + 0.0) / 3)
    assert r.itl.count == 18
    assert r.e2e.p99 == pytest.approx(percentile([1.1, 0.55, 0.9], 99))
    table = render_table(r)
    assert "503 share 50.00%" in table
    assert report_to_dict(r)["ttft"]["count"] == 3


def test_non_streamed_runs_have_no_ttft_and_no_goodput() -> None:
    o = Outcome(0.0, 2.0, 200, 1, 0, 10, 16)
    r = summarize_outcomes([o], Slo(0.5, 0.06))
    assert r.goodput_rps is None
    assert r.ttft.count == 0 and r.ttft.p95 is None
    assert r.e2e.p50 == 2.0
    assert "goodput - req/s" in render_table(r)


def test_a_200_that_vllm_ended_with_abort_is_an_error_not_a_success() -> None:
    cut = Outcome(0.0, 2.0, 200, 1, 0, 10, 3, finish_reason="abort")
    done = Outcome(0.0, 2.0, 200, 1, 0, 10, 16, finish_reason="length")
    assert (cut.ok, done.ok) == (False, True)
    report = summarize_outcomes([cut, done], Slo(ttft=1.0, tpot=0.1))
    assert (report.succeeded, report.errors, report.rejected) == (1, 1, 0)


def test_empty_run_reports_zeros() -> None:
    r = summarize_outcomes([], Slo(0.5, 0.06))
    assert (r.requests, r.throughput_rps, r.rejection_share, r.goodput_rps) == (0, 0.0, 0.0, None)


def test_backoff_delays_are_seeded_capped_and_stop_at_the_deadline() -> None:
    policy = RetryPolicy(deadline=30.0, base=0.5, cap=8.0)
    a = list(policy.delays(random.Random(42)))
    assert a == list(policy.delays(random.Random(42)))
    assert a != list(policy.delays(random.Random(43)))
    ceilings = [min(8.0, 0.5 * 2**k) for k in range(len(a))]
    assert all(0.0 <= d <= c for d, c in zip(a, ceilings, strict=True))
    assert sum(a) <= 30.0
    # replaying the same draws: the next one would have crossed the deadline
    rng = random.Random(42)
    assert [rng.uniform(0.0, policy.ceiling(k)) for k in range(len(a))] == a
    assert sum(a) + rng.uniform(0.0, policy.ceiling(len(a))) > 30.0


def test_backoff_ceiling_doubles_up_to_the_cap() -> None:
    policy = RetryPolicy(deadline=30.0, base=0.5, cap=8.0)
    assert [policy.ceiling(k) for k in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert policy.ceiling(10_000) == 8.0


def test_next_delay_refuses_a_retry_past_the_deadline() -> None:
    policy = RetryPolicy(deadline=1.0, base=0.5, cap=0.5)
    assert policy.next_delay(0, elapsed=1.0, rng=random.Random(0)) is None
    d = policy.next_delay(0, elapsed=0.0, rng=random.Random(0))
    assert d is not None and 0.0 <= d <= 0.5


def test_zero_deadline_means_no_retry() -> None:
    assert list(RetryPolicy(deadline=0.0, base=0.5, cap=8.0).delays(random.Random(1))) == []


@pytest.mark.parametrize(("deadline", "base", "cap"), [(-1, 0.5, 8), (30, 0, 8), (30, 1, 0.5)])
def test_invalid_policies_are_refused(deadline: float, base: float, cap: float) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(deadline, base, cap)
