"""Length distributions, workloads, the busiest slice and the per-replica share."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_operator.planning.lengths import (
    Empirical,
    LengthSyntaxError,
    empirical_from_buckets,
    parse_lengths,
)
from vllm_operator.planning.workload import (
    WARMUP_SECONDS,
    Arrivals,
    Workload,
    build_arrivals,
    busiest_slice,
    compute_stats,
    thin,
)
from vllm_operator.sim.engine import SimRequest
from vllm_operator.sim.workload import LengthDist


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512", LengthDist("fixed", 512)),
        ("fixed:128", LengthDist("fixed", 128)),
        ("exp:256", LengthDist("exponential", 256)),
        ("exponential:64", LengthDist("exponential", 64)),
        ("lognormal:1024,0.8", LengthDist("lognormal", 1024, 0.8)),
        ("uniform:100,300", LengthDist("uniform", 100, 300)),
    ],
)
def test_length_syntax(text: str, expected: LengthDist) -> None:
    assert parse_lengths(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("gauss:5", "is not a length distribution"),
        ("exp:1,2", "is not a length distribution"),
        ("lognormal:512", "is not a length distribution"),
        ("exp:abc", "must be numbers"),
        ("exp:-5", "must be positive"),
        ("uniform:300,100", "LOW <= HIGH"),
        ("exp:inf", "must be positive"),
        ("lognormal:100,1e300", "SIGMA must be at most 10"),
        ("exp:1e300", "at most 10,000,000 tokens"),
        ("uniform:1,1e9", "at most 10,000,000 tokens"),
    ],
)
def test_bad_length_syntax_says_what_is_accepted(text: str, says: str) -> None:
    with pytest.raises(LengthSyntaxError, match=says):
        parse_lengths(text)


def test_empirical_lengths_follow_the_histogram() -> None:
    # 100 observations: 50 at or below 10 tokens, 50 in (100, 1000]; +Inf adds none
    dist = empirical_from_buckets([(10, 50), (100, 50), (1000, 100), (float("inf"), 100)])
    assert dist == Empirical((10, 100, 1000), (0.5, 0.5, 1.0))
    rng = random.Random(1)
    draws = [dist.sample(rng) for _ in range(2000)]
    assert all(1 <= d <= 10 or 100 <= d <= 1000 for d in draws)
    assert 0.45 < sum(d <= 10 for d in draws) / len(draws) < 0.55
    assert dist.mean == pytest.approx(0.5 * 5.5 + 0.5 * 550)


def test_lengths_at_the_top_of_their_bucket_keep_their_exact_mean() -> None:
    # fixed 200-token prompts all fall in (100, 200]: uniform inside it says 150
    buckets = [(100, 0), (200, 40), (500, 40), (float("inf"), 40)]
    assert empirical_from_buckets(buckets).mean == pytest.approx(150)
    dist = empirical_from_buckets(buckets, total=40 * 200)
    assert dist.exact_mean == 200 and dist.mean == pytest.approx(200)
    assert dist.skew == 0
    assert {dist.sample(random.Random(s)) for s in range(50)} == {200}
    assert dist.second_moment == pytest.approx(200 * 200)


def test_an_unusable_sum_leaves_the_mean_to_the_buckets() -> None:
    buckets = [(10, 50), (100, 50), (1000, 100), (float("inf"), 100)]
    for total in (None, 0.0, -5.0, float("nan"), float("inf")):
        assert empirical_from_buckets(buckets, total) == Empirical((10, 100, 1000), (0.5, 0.5, 1.0))


def test_without_an_exact_mean_the_draws_are_the_uniform_ones() -> None:
    # the same seed gives the same lengths as before the exact mean existed
    dist = Empirical((10, 100, 1000), (0.5, 0.5, 1.0))
    rng, ref = random.Random(3), random.Random(3)
    for _ in range(200):
        u = ref.random()
        i = 0 if u < 0.5 else 2
        low, high = (1.0, 10.0) if i == 0 else (100.0, 1000.0)
        assert dist.sample(rng) == max(1, round(ref.uniform(low, high)))


_EDGES = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0)


@st.composite
def _histograms(draw: st.DrawFn) -> tuple[Empirical, float]:
    shares = draw(st.lists(st.integers(0, 50), min_size=len(_EDGES), max_size=len(_EDGES)))
    if not any(shares):
        shares[-1] = 1
    counts = [sum(shares[: i + 1]) for i in range(len(shares))]
    base = empirical_from_buckets(list(zip(_EDGES, counts, strict=True)))
    wanted = draw(st.floats(0.5, 3000.0))
    return Empirical(base.edges, base.cumulative, wanted), wanted


@settings(derandomize=True, max_examples=150, deadline=None)
@given(_histograms())
def test_the_mean_is_the_exact_one_within_what_the_buckets_allow(
    case: tuple[Empirical, float],
) -> None:
    dist, wanted = case
    buckets = dist._buckets()
    lowest = sum(share * low for share, low, _ in buckets)
    highest = sum(share * (low + width) for share, low, width in buckets)
    assert dist.mean == pytest.approx(min(max(wanted, lowest), highest), rel=1e-5, abs=1e-2)
    assert dist.second_moment >= dist.mean**2 * (1 - 1e-9)  # a variance is never negative
    rng = random.Random(0)
    draws = [dist.sample(rng) for _ in range(400)]
    # every draw stays in a bucket the histogram holds: the histogram itself still holds
    held = [(low, low + width) for share, low, width in buckets if share > 0]
    assert all(any(lo - 0.5 <= d <= hi + 0.5 or d == 1 for lo, hi in held) for d in draws)


def test_an_empty_histogram_is_refused() -> None:
    with pytest.raises(ValueError, match="no observations"):
        empirical_from_buckets([(10, 0), (float("inf"), 0)])


def _arrivals(times: list[float], tokens: list[int]) -> Arrivals:
    reqs = tuple(
        SimRequest(f"r{i}", t, n, 1) for i, (t, n) in enumerate(zip(times, tokens, strict=True))
    )
    return Arrivals(reqs, times[-1])


def test_the_busiest_slice_is_the_window_with_most_tokens_after_its_warmup() -> None:
    times = [float(t) for t in range(0, 2000, 10)]
    tokens = [1000 if 1200 <= t < 1500 else 10 for t in times]
    sliced = busiest_slice(_arrivals(times, tokens), seconds=300, warmup=30)
    counted = [r for r in sliced.requests if r.arrival >= sliced.count_from]
    assert sliced.count_from == 30 and sliced.until == 330
    assert [r.prompt_tokens for r in counted] == [1000] * 30
    assert min(r.arrival for r in sliced.requests) >= 0


def test_a_short_workload_is_searched_whole() -> None:
    arrivals = _arrivals([0.0, 1.0, 2.0], [5, 5, 5])
    assert busiest_slice(arrivals, seconds=300, warmup=30) is arrivals


def test_a_replica_of_a_round_robin_fleet_gets_every_rth_request() -> None:
    arrivals = _arrivals([float(t) for t in range(10)], [1] * 10)
    assert [r.request_id for r in thin(arrivals, 3, 1).requests] == ["r1", "r4", "r7"]


def test_poisson_workload_counts_after_its_warmup() -> None:
    w = Workload("poisson", "p", rate=5, prompt=LengthDist("fixed", 100), output=LengthDist())
    arrivals = build_arrivals(w)
    assert arrivals == build_arrivals(w)  # deterministic for the seed
    stats = compute_stats(arrivals)
    assert stats.prompt_mean == 100 and stats.total_max == 356
    assert 4 < stats.rate < 6


def test_trace_lengths_can_be_replaced() -> None:
    w = Workload("trace", "t", trace="conv", output=LengthDist("fixed", 7))
    arrivals = build_arrivals(w)
    assert {r.max_tokens for r in arrivals.requests} == {7}
    assert len(arrivals.requests) > 19000


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": "trace"},
        {"kind": "poisson", "rate": 0, "prompt": LengthDist(), "output": LengthDist()},
        {"kind": "closed", "concurrency": 4},
    ],
)
def test_incomplete_workloads_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="needs"):
        Workload(label="x", **kwargs)  # type: ignore[arg-type]


def test_plain_poisson_arrivals_are_drawn_as_before_bursts() -> None:
    """burst 1 draws exactly what the Poisson workload drew before bursts existed (the capacity
    cache's figures and every benchmark of a Poisson load stay as they were)."""
    w = Workload("poisson", "p", rate=3, prompt=LengthDist("lognormal", 500, 1.0),
                 output=LengthDist("lognormal", 80, 0.8), seed=4, horizon=120)  # fmt: skip
    rng, expected, t = random.Random(4), [], 0.0
    assert w.prompt is not None and w.output is not None
    while (t := t + rng.expovariate(3)) < 150:
        expected.append((t, w.prompt.sample(rng), w.output.sample(rng)))
    got = build_arrivals(w).requests
    assert [(r.arrival, r.prompt_tokens, r.max_tokens) for r in got] == expected


def _dispersion(times: list[float], start: float, end: float, width: float = 30.0) -> float:
    counts = [0] * int((end - start) // width)
    for t in times:
        if start <= t < start + width * len(counts):
            counts[int((t - start) // width)] += 1
    mean = sum(counts) / len(counts)
    return sum((b - a) ** 2 for a, b in itertools.pairwise(counts)) / (len(counts) - 1) / 2 / mean


@pytest.mark.parametrize("burst", [1.0, 4.0, 16.0])
def test_bursty_arrivals_keep_the_rate_and_vary_as_bursts_of_that_size_do(burst: float) -> None:
    """Compound Poisson with geometric bursts of mean m: the rate stays, and the 30 s counts'
    dispersion is about 2 m - 1 (a burst over BURST_SECONDS rarely straddles two bins)."""
    w = Workload("poisson", "p", rate=4, prompt=LengthDist("fixed", 100), output=LengthDist(),
                 horizon=36000, burst=burst)  # fmt: skip
    arrivals = build_arrivals(w)
    times = [r.arrival for r in arrivals.requests]
    assert times == sorted(times) and all(0 <= t < arrivals.until for t in times)
    assert len({r.request_id for r in arrivals.requests}) == len(times)
    assert compute_stats(arrivals).rate == pytest.approx(4, rel=0.1)
    found = _dispersion(times, WARMUP_SECONDS, arrivals.until)
    assert found == pytest.approx(2 * burst - 1, rel=0.25, abs=0.2)


@pytest.mark.parametrize("burst", [0.5, 0.0, -1.0, math.nan, math.inf])
def test_a_burst_below_one_request_is_refused(burst: float) -> None:
    with pytest.raises(ValueError, match="burst must be a number >= 1"):
        Workload("poisson", "p", rate=1, prompt=LengthDist(), output=LengthDist(), burst=burst)
