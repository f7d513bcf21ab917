"""bench/arrival_burstiness.py: its dispersion, its re-timed arrivals and its flags (the replays
are the engine model's, covered elsewhere)."""

from __future__ import annotations

import math

import pytest
from bench.arrival_burstiness import (
    Replay,
    as_bursts,
    as_poisson,
    code_slice,
    dispersion,
    distances,
    parse,
)

from vllm_operator.planning.workload import WARMUP_SECONDS


def test_dispersion_is_as_the_operator_reads_it() -> None:
    # counts 10, 10, 70, 10 per 30 s: changes 0, 60, -60, the largest left out;
    # (3600 / 2 / 2) / 25 = 36
    times = [k * 3.0 for k in range(10)] + [30 + k * 3.0 for k in range(10)]
    times += [60 + k * 0.4 for k in range(70)] + [90 + k * 3.0 for k in range(10)]
    assert dispersion(times, 0.0, 120.0) == pytest.approx(36.0)
    assert math.isnan(dispersion([], 0.0, 120.0))
    with pytest.raises(ValueError, match="fewer than three"):
        dispersion(times, 0.0, 89.0)


def test_retimed_arrivals_keep_the_requests_and_the_rate() -> None:
    sliced = code_slice(300.0, 600.0)
    assert sliced.count_from == WARMUP_SECONDS and sliced.until == 630.0
    # fifty-odd bursts of about 38 in the slice: their number, so the requests, vary more
    for retimed, rel in ((as_poisson(sliced), 0.1), (as_bursts(sliced, 5.0, seed=1), 0.3)):
        times = [r.arrival for r in retimed.requests]
        assert times == sorted(times) and all(0 <= t < sliced.until for t in times)
        assert len(retimed.requests) == pytest.approx(len(sliced.requests), rel=rel)
        lengths = {(r.prompt_tokens, r.max_tokens) for r in retimed.requests}
        assert lengths <= {(r.prompt_tokens, r.max_tokens) for r in sliced.requests}
    poisson = as_poisson(sliced)
    counted = [r.arrival for r in poisson.requests if r.arrival >= WARMUP_SECONDS]
    assert dispersion(counted, WARMUP_SECONDS, 600.0) < 3  # the code trace's bursts are gone


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--start", "10"], "--start: at least 30"),
        (["--seconds", "30"], "--seconds: at least 60"),
        (["--pods", "3,x"], "--pods: expected comma-separated numbers"),
        (["--pods", "0"], "--pods: every value must be a positive number"),
        (["--tokens", "512.5"], "--tokens: whole numbers only"),
        (["--tokens", "32"], "--tokens: vLLM needs at least maxSeqs"),
        (["--jobs", "0"], "--jobs: at least 1"),
    ],
)
def test_bad_flags_are_refused_in_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        parse(argv)


def test_distances_are_to_the_traces_own_share_cell_by_cell() -> None:
    replays = [
        Replay("trace", 3, 512, 0.6, 1.0, 0.02),
        Replay("trace", 5, 512, 0.9, 0.4, 0.02),
        Replay("poisson", 3, 512, 1.0, 0.3, 0.008),
        Replay("poisson", 5, 512, 1.0, 0.3, 0.008),
        Replay("bursts 3s", 3, 512, 0.5, 1.2, 0.02),
    ]
    found = distances(replays)
    assert found["poisson"] == pytest.approx((0.25, 0.4))
    assert found["bursts 3s"] == pytest.approx((0.1, 0.1))
    assert "bursts 1s" not in found  # no cell of that kind
