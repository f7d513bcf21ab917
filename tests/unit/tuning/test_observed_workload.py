"""observed_workload: one pod's share of what a service's clients sent, or why it is unknown."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.tuning.support import snap, spec
from vllm_operator.planning.lengths import Empirical
from vllm_operator.tuning.observed_workload import (
    BURST_STEPS_PER_DOUBLING,
    MAX_BURST,
    ServiceLoad,
    Unmeasured,
    burst_size,
    observed_workload,
)

PROMPTS = Empirical((100.0, 1000.0), (0.5, 1.0))
OUTPUTS = Empirical((10.0, 100.0), (0.25, 1.0))


def test_the_rate_is_shared_over_the_pods_that_reported() -> None:
    seen = observed_workload(
        spec(), snap(request_rate=9.0, pods_scraped=3, prompt_lengths=PROMPTS,
                     output_lengths=OUTPUTS)
    )  # fmt: skip
    assert isinstance(seen, ServiceLoad)
    assert (seen.workload.kind, seen.workload.rate, seen.pods) == ("poisson", 3.0, 3)
    assert (seen.workload.prompt, seen.workload.output) == (PROMPTS, OUTPUTS)
    assert (seen.gpu, seen.gpus_per_pod, seen.model) == ("H100-80GB", 1, "m")


def test_a_partial_snapshot_still_measures_the_pods_that_answered() -> None:
    seen = observed_workload(
        spec(), snap(quality="partial", pods_scraped=1, prompt_lengths=PROMPTS,
                     output_lengths=OUTPUTS)
    )  # fmt: skip
    assert isinstance(seen, ServiceLoad) and seen.workload.rate == 10.0


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"quality": "stale"}, "the metrics are stale"),
        ({"request_rate": None}, "no requests in the window"),
        ({"request_rate": 0.0}, "no requests in the window"),
        ({"prompt_lengths": None}, "no vllm:request_prompt_tokens histogram in the window"),
        ({"output_lengths": None}, "no vllm:request_generation_tokens histogram in the window"),
    ],
)
def test_what_is_not_measured_is_named(changes: dict[str, object], reason: str) -> None:
    base = {"prompt_lengths": PROMPTS, "output_lengths": OUTPUTS}
    assert observed_workload(spec(), snap(**{**base, **changes})) == Unmeasured(reason)


def test_a_bursty_window_gives_each_pod_its_share_of_the_bursts() -> None:
    """Dispersion 33: bursts of 17 requests on average; three pods get about 5.7 each, on the
    sqrt(2) grid 5.66 (2^2.5)."""
    seen = observed_workload(
        spec(), snap(request_rate=9.0, pods_scraped=3, prompt_lengths=PROMPTS,
                     output_lengths=OUTPUTS, arrival_dispersion=33.0)
    )  # fmt: skip
    assert isinstance(seen, ServiceLoad)
    assert seen.workload.burst == pytest.approx(2**2.5)


@pytest.mark.parametrize("dispersion", [None, math.nan, math.inf, -1.0, 0.0, 1.0, 2.99])
def test_an_unmeasured_or_poisson_like_dispersion_replays_plain_poisson(
    dispersion: float | None,
) -> None:
    assert burst_size(dispersion) == 1.0
    assert burst_size(dispersion, pods=4) == 1.0


DISPERSIONS = st.floats(min_value=0.0, max_value=1e7, allow_nan=False)


@given(DISPERSIONS, DISPERSIONS, st.integers(1, 1000), st.integers(1, 1000))
def test_burst_sizes_grow_with_the_dispersion_and_shrink_with_the_pods(
    d1: float, d2: float, p1: int, p2: int
) -> None:
    (low, high), (few, many) = sorted((d1, d2)), sorted((p1, p2))
    assert burst_size(low, few) <= burst_size(high, few)
    assert burst_size(high, many) <= burst_size(high, few)
    size = burst_size(high, few)
    assert 1.0 <= size <= MAX_BURST
    steps = math.log2(size) * BURST_STEPS_PER_DOUBLING
    assert steps == pytest.approx(round(steps))  # on the grid: a few cache keys per service
    if size > 1:  # within half a grid step of (D + 1) / 2 / pods, unless capped
        exact = (high + 1) / 2 / few
        assert size == MAX_BURST or abs(math.log2(size / exact)) <= 0.5 / BURST_STEPS_PER_DOUBLING
