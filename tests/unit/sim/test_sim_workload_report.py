"""Workload generators and the aggregate figures, on inputs whose answers are known."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from vllm_operator.sim import workload as wl
from vllm_operator.sim.engine import RequestRecord
from vllm_operator.sim.report import Slo, compute_figures, format_table, percentile

FIXED = wl.LengthDist("fixed", 100)


def test_percentile_interpolates_between_ranks() -> None:
    values = [0.1, 0.2, 0.3, 0.4]
    assert percentile(values, 50) == pytest.approx(0.25)
    assert percentile(values, 95) == pytest.approx(0.385)
    assert percentile(values, 99) == pytest.approx(0.397)
    assert percentile([7.0], 99) == 7.0
    assert math.isnan(percentile([], 50))


def _record(rid: str, ttft: float, gaps: list[float]) -> RequestRecord:
    times = [ttft]
    for gap in gaps:
        times.append(times[-1] + gap)
    return RequestRecord(
        request_id=rid,
        arrival=0.0,
        scheduled=0.0,
        first_token=ttft,
        finished=times[-1],
        prompt_tokens=10,
        output_tokens=len(times),
        preemptions=0,
        finish_reason="length",
        token_times=tuple(times),
    )


def test_figures_on_a_tiny_known_set() -> None:
    records = [
        _record("a", 0.1, [0.01, 0.01]),
        _record("b", 0.2, [0.02, 0.02]),
        _record("c", 0.3, [0.05, 0.09]),  # ITL p95 = 0.088: misses a 60 ms ITL SLO
        _record("d", 0.4, []),  # one output: no ITL, judged on TTFT alone
    ]
    figures = compute_figures(
        records,
        offered=5,
        rejected_reasons=["max_num_queued_reqs"],
        unfinished=0,
        window=2.0,
        slo=Slo(ttft=0.35, itl=0.06),
        kv_usage_mean=0.25,
        kv_usage_max=0.5,
        preemptions=3,
    )
    assert (figures.ttft.p50, figures.ttft.p95, figures.ttft.p99) == pytest.approx(
        (0.25, 0.385, 0.397)
    )
    # ITL over every gap of every request: 0.01 0.01 0.02 0.02 0.05 0.09
    assert figures.itl.count == 6
    assert figures.itl.p50 == pytest.approx(0.02)
    assert figures.itl.mean == pytest.approx(0.2 / 6)
    assert figures.e2e.p50 == pytest.approx((0.24 + 0.40) / 2)  # of 0.12 0.24 0.40 0.44
    assert figures.rejected_share == pytest.approx(0.2)
    assert figures.throughput_rps == pytest.approx(2.0)
    assert figures.output_tps == pytest.approx(10 / 2.0)
    # a and b meet both SLOs; c misses ITL; d misses TTFT
    assert figures.goodput_rps == pytest.approx(1.0)
    assert figures.goodput_share == pytest.approx(0.4)
    table = format_table(figures)
    assert "TTFT p50/p95/p99" in table and "250.0 ms / 385.0 ms / 397.0 ms" in table


def test_trace_rate_multiplier_window_and_loop() -> None:
    base = wl.azure_trace("conv", duration=600.0)
    fast = wl.azure_trace("conv", rate_multiplier=4.0, duration=150.0)
    assert len(fast) == len(base)  # 4x faster: the same requests in a quarter of the time
    for slow, quick in zip(base, fast, strict=True):
        assert quick.arrival == pytest.approx(slow.arrival / 4)
        assert (quick.prompt_tokens, quick.max_tokens) == (slow.prompt_tokens, slow.max_tokens)
    assert (base[0].prompt_tokens, base[0].max_tokens) == (374, 44)  # first row of the CSV
    late = wl.azure_trace("conv", start=600.0, duration=10.0)
    assert late[0].arrival >= 0 and all(r.arrival < 10.0 for r in late)
    tail = wl.azure_trace("conv", start=3300.0)  # the last minutes of the trace
    looped = wl.azure_trace("conv", start=3300.0, duration=2.5 * tail[-1].arrival, loop=True)
    assert len(tail) * 2 < len(looped) < len(tail) * 3
    assert [r.arrival for r in looped] == sorted(r.arrival for r in looped)


def test_trace_reader_refuses_other_csvs(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("time,prompt,output\n1,2,3\n")
    with pytest.raises(ValueError, match="expected columns TIMESTAMP,ContextTokens"):
        wl.read_trace(path)


def test_poisson_is_seeded_and_near_its_rate() -> None:
    a = wl.poisson(10.0, 200.0, FIXED, FIXED, seed=1)
    assert a == wl.poisson(10.0, 200.0, FIXED, FIXED, seed=1)
    assert a != wl.poisson(10.0, 200.0, FIXED, FIXED, seed=2)
    assert 1800 < len(a) < 2200


def test_time_varying_rates() -> None:
    ramp = wl.ramp(0.0, 20.0, 100.0, FIXED, FIXED, seed=1)
    first = sum(1 for r in ramp if r.arrival < 50)
    assert 2.5 < (len(ramp) - first) / first < 3.5  # integral 750 vs 250 in the two halves
    bursty = wl.bursty(20.0, 0.0, 5.0, 15.0, 100.0, FIXED, FIXED, seed=1)
    assert all(r.arrival % 20.0 < 5.0 for r in bursty)
    assert 400 < len(bursty) < 600
    diurnal = wl.diurnal(10.0, 1.0, 100.0, 100.0, FIXED, FIXED, seed=1)
    peak = sum(1 for r in diurnal if r.arrival < 50)
    assert peak > 3 * (len(diurnal) - peak)  # expected ratio 818:182 (sin > 0 first)


@pytest.mark.parametrize("kind", ["exponential", "lognormal"])
def test_length_distributions_hit_their_mean(kind: str) -> None:
    dist = wl.LengthDist(kind, 500.0, 0.5 if kind == "lognormal" else 1.0)
    rng = random.Random(0)
    samples = [dist.sample(rng) for _ in range(20000)]
    assert sum(samples) / len(samples) == pytest.approx(500, rel=0.05)
    assert min(samples) >= 1
