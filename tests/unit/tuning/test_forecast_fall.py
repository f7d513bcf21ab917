"""A load past its peak (forecast.py, falling_share): when both halves of the long window fall,
a scale-down fits the present, not the long window's peak; a burst's end is no such fall."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.tuning.support import T0, brief, history, snap, spec, state
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.forecast import falling_share, observe
from vllm_operator.tuning.inputs import Inputs
from vllm_operator.tuning.model import Capacity, MetricsSnapshot, TuningState
from vllm_operator.tuning.settings import TuningSettings

DEFAULTS = TuningSettings()
CAPACITY = Capacity(8.0, T0)  # 6.4 req/s per pod under the scale-down's headroom
LOW = {"running": 4.8, "waiting": 0.0, "ttft_p95": 0.3, "itl_p95": 0.02, "kv_usage": 0.4}
# 20 passes over the 10-minute window, from 9 req/s down to 4.25 (0.5 req/s per minute, 7.7% of the
# mean), then this pass's 4
EVENING = history(*[9.0 - 0.25 * k for k in range(20)])
BURST_END = history(*[9.0 - 1.0 * k for k in range(5)], *[4.0] * 15)  # fell, then flat


def inputs(snapshot: MetricsSnapshot, st_: TuningState) -> Inputs:
    return observe(Inputs(spec(), snapshot, st_, T0, DEFAULTS, autotune_acts=False))


def test_a_load_falling_through_the_long_window_scales_down_to_the_present() -> None:
    quiet, voted = snap(request_rate=4.0, **LOW), state(scale_down_votes=3, capacity=CAPACITY)
    share = falling_share(inputs(quiet, replace(voted, arrivals=EVENING)))
    assert share is not None and share == pytest.approx(
        0.5 / 6.5, rel=0.01
    )  # 0.5 req/s per minute, mean 6.5
    decision = decide(spec(), quiet, replace(voted, arrivals=EVENING), T0)
    # 4 req/s fits one pod under 6.4; the window's 9 would have needed two
    assert brief(decision) == ("ScaleReplicas", "ScaleDownLowLoad", "replicas", 2, 1)
    assert "arrivals falling 7.7% per minute for 10 min: sized for the present" in decision.message


def test_a_burst_that_ended_is_not_a_falling_load() -> None:
    quiet, voted = snap(request_rate=4.0, **LOW), state(scale_down_votes=3, capacity=CAPACITY)
    assert falling_share(inputs(quiet, replace(voted, arrivals=BURST_END))) is None
    decision = decide(spec(), quiet, replace(voted, arrivals=BURST_END), T0)
    assert decision.reason == "WithinSLO" and decision.state.desired_replicas == 2


def test_a_fall_seen_over_a_few_minutes_only_or_too_slow_is_none() -> None:
    quiet = snap(request_rate=4.0, **LOW)
    short = history(*[9.0 - 0.5 * k for k in range(10)], step=20.0)  # 200 s of passes
    assert falling_share(inputs(quiet, state(arrivals=short))) is None
    slow = history(*[4.4 - 0.002 * k for k in range(20)])  # 0.05% of the mean per minute
    assert falling_share(inputs(quiet, state(arrivals=slow))) is None


def test_the_fall_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="fall_rate > 0"):
        TuningSettings(fall_rate=0.0)


@settings(derandomize=True, max_examples=150, deadline=None)
@given(
    older=st.lists(st.floats(0.0, 100.0), min_size=10, max_size=10),
    newer=st.lists(st.floats(0.0, 100.0), min_size=10, max_size=10),
)
def test_no_fall_is_read_where_the_newer_half_does_not_fall(
    older: list[float], newer: list[float]
) -> None:
    rising_newer = sorted(newer)  # a newer half that never falls
    snapshot = snap(request_rate=rising_newer[-1], **LOW)
    arrivals = history(*older, *rising_newer[:-1])
    assert falling_share(inputs(snapshot, state(arrivals=arrivals))) is None
