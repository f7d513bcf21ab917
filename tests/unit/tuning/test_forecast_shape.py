"""The daily shape (forecast.py, past_period_rate): the arrivals one traffic period ago, read
from Prometheus, forecast what comes next when the recent passes followed them; they then
replace the trend, the long window's peak and rule 8b."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.unit.metrics.fake import FakePrometheus, load
from tests.unit.tuning.support import T0, brief, history, snap, spec, state
from vllm_operator.api.durations import parse_duration
from vllm_operator.metrics.prometheus import QueryFailure, query_past_period
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.forecast import (
    SHAPE_MIN_PASSES,
    forecast,
    observe,
    past_period_rate,
    rate_at,
)
from vllm_operator.tuning.inputs import Inputs
from vllm_operator.tuning.model import (
    Capacity,
    ImplausibleFigureError,
    MetricsSnapshot,
    PastPeriod,
    RateSample,
    TuningState,
)
from vllm_operator.tuning.scaling import near_capacity
from vllm_operator.tuning.settings import TuningSettings

DEFAULTS = TuningSettings()
DAY = 86400.0
CAPACITY = Capacity(8.0, T0 - timedelta(minutes=10))  # 7.2 req/s per pod at 90%, 6.4 at 80%
LOW = {"running": 4.8, "waiting": 0.0, "ttft_p95": 0.3, "itl_p95": 0.02, "kv_usage": 0.4}


def day_ago(shape: dict[int, float], period: float = DAY) -> PastPeriod:
    """The rate one period before T0 + d for each d (seconds) in `shape`, every 60 s between
    the given points taking the last one given (a step function)."""
    points = sorted(shape)
    rates = []
    for d in range(points[0], points[-1] + 1, 60):
        level = shape[max(p for p in points if p <= d)]
        rates.append(RateSample(T0 - timedelta(seconds=period) + timedelta(seconds=d), level))
    return PastPeriod(period, tuple(rates))


def inputs(snapshot: MetricsSnapshot, st_: TuningState) -> Inputs:
    return observe(Inputs(spec(), snapshot, st_, T0, DEFAULTS, autotune_acts=False))


# Yesterday: 5 req/s until now, 20 from 4 minutes on (inside the default 300 s ready time).
# Today: 10 req/s, yesterday's 5 at today's level of +5.
BURST = day_ago({-600: 5.0, 240: 20.0, 900: 20.0})
FLAT_TODAY = history(*[10.0] * 12)


def test_a_followed_shape_forecasts_its_peak_at_todays_level_past_the_growth_cap() -> None:
    ahead = forecast(inputs(snap(past_period=BURST), state(arrivals=FLAT_TODAY)))
    assert ahead is not None
    # 20 + (10 - 5): the trend alone would say 10, and its cap is 1.5 x 10 = 15
    assert ahead.past_period_rate == pytest.approx(25.0) and ahead.rate == pytest.approx(25.0)


def test_rule_8_scales_ahead_of_a_burst_the_present_does_not_show() -> None:
    snapshot, before = snap(past_period=BURST), state(arrivals=FLAT_TODAY, capacity=CAPACITY)
    decision = decide(spec(), snapshot, before, T0)
    # 25 req/s at 7.2 per pod: 4 replicas (maxReplicas 4)
    assert brief(decision) == ("ScaleReplicas", "ScaleUpForecast", "replicas", 2, 4)
    assert "the peak one period ago at today's level" in decision.message
    # without the past period, the same figures are a steady load within the SLO
    assert decide(spec(), snap(), before, T0).reason == "WithinSLO"


def test_a_shape_today_did_not_follow_is_not_used() -> None:
    # yesterday swung between 0 and 20 every minute over the last ten; today stayed at 10
    swinging = PastPeriod(
        DAY,
        tuple(
            RateSample(T0 - timedelta(seconds=DAY - d), 0.0 if (d // 60) % 2 else 20.0)
            for d in range(-600, 901, 60)
        ),
    )
    ahead = forecast(inputs(snap(past_period=swinging), state(arrivals=FLAT_TODAY)))
    assert ahead is not None and ahead.past_period_rate is None and ahead.rate == 10.0


def test_too_few_recent_passes_cannot_tell_a_shape() -> None:
    few = history(*[10.0] * (SHAPE_MIN_PASSES - 2))  # with this pass's: one short
    assert past_period_rate(inputs(snap(past_period=BURST), state(arrivals=few)), 300.0) is None
    enough = history(*[10.0] * (SHAPE_MIN_PASSES - 1))
    assert past_period_rate(inputs(snap(past_period=BURST), state(arrivals=enough)), 300.0)


def test_no_past_period_or_no_samples_is_the_trend_alone() -> None:
    empty = PastPeriod(DAY, ())
    for snapshot in (snap(), snap(past_period=empty)):
        ahead = forecast(inputs(snapshot, state(arrivals=FLAT_TODAY)))
        assert ahead is not None and ahead.past_period_rate is None


# The long window saw 9 req/s ten minutes ago; now 4. One pod would sit above 6.4 req/s at 9.
FALLEN = history(9.0, 9.0, *[4.0] * 14)


def test_a_shape_that_stays_low_lets_a_scale_down_past_the_long_windows_peak() -> None:
    quiet, voted = snap(request_rate=4.0, **LOW), state(scale_down_votes=3, capacity=CAPACITY)
    assert brief(decide(spec(), quiet, replace(voted, arrivals=FALLEN), T0))[1] == "WithinSLO"
    # yesterday fell the same way and stayed low for the next quarter hour
    stays_low = day_ago({-600: 9.0, -540: 4.0, 900: 4.0})
    decision = decide(spec(), replace(quiet, past_period=stays_low),
                      replace(voted, arrivals=FALLEN), T0)  # fmt: skip
    assert brief(decision) == ("ScaleReplicas", "ScaleDownLowLoad", "replicas", 2, 1)


def test_a_shape_that_comes_back_within_the_horizon_keeps_the_pods() -> None:
    quiet, voted = snap(request_rate=4.0, **LOW), state(scale_down_votes=3, capacity=CAPACITY)
    comes_back = day_ago({-600: 9.0, -540: 4.0, 300: 9.0, 900: 9.0})
    decision = decide(spec(), replace(quiet, past_period=comes_back),
                      replace(voted, arrivals=FALLEN), T0)  # fmt: skip
    assert decision.reason == "WithinSLO" and decision.state.desired_replicas == 2


def test_rule_8b_leaves_it_to_a_followed_shape() -> None:
    # 7 req/s per pod, above 80% of 8, ITL no longer quiet: 8b would add a pod ...
    busy = snap(request_rate=14.0, itl_p95=0.045, past_period=None)
    near = state(arrivals=history(*[14.0] * 12), capacity=CAPACITY)
    assert near_capacity(inputs(busy, near))
    # ... unless yesterday's shape says the load stays where it is: then rule 8 judges
    plateau = day_ago({-600: 14.0, 900: 14.0})
    assert not near_capacity(inputs(replace(busy, past_period=plateau), near))


def test_rate_at_interpolates_and_says_none_outside() -> None:
    past = day_ago({0: 2.0, 60: 4.0})
    then = T0 - timedelta(seconds=DAY)
    assert rate_at(past, then + timedelta(seconds=30)) == pytest.approx(3.0)
    assert rate_at(past, then - timedelta(seconds=1)) is None
    assert rate_at(PastPeriod(DAY, ()), then) is None


def test_a_past_period_refuses_what_is_no_rate_or_no_order() -> None:
    at = T0 - timedelta(days=1)
    with pytest.raises(ImplausibleFigureError, match="request_rate is nan"):
        PastPeriod(DAY, (RateSample(at, math.nan),))
    with pytest.raises(ImplausibleFigureError, match="increasing time order"):
        PastPeriod(DAY, (RateSample(at, 1.0), RateSample(at, 2.0)))
    with pytest.raises(ImplausibleFigureError, match="period"):
        PastPeriod(0.0, ())


rates = st.floats(min_value=0.0, max_value=1e5, allow_nan=False)


@settings(derandomize=True, max_examples=150, deadline=None)
@given(
    before=st.lists(rates, min_size=11, max_size=11),
    after=st.lists(rates, min_size=16, max_size=16),
    level=st.floats(min_value=-50.0, max_value=1e5),
    more=st.floats(min_value=0.0, max_value=1e5),
)
def test_the_shape_forecast_is_finite_and_more_load_then_never_forecasts_less(
    before: list[float], after: list[float], level: float, more: float
) -> None:
    then = T0 - timedelta(seconds=DAY)

    def past(ahead: list[float]) -> PastPeriod:
        values = [*before, *ahead]
        return PastPeriod(DAY, tuple(
            RateSample(then + timedelta(seconds=60 * (k - 10)), v) for k, v in enumerate(values)
        ))  # fmt: skip

    # today followed yesterday exactly, `level` above it (never below zero)
    followed = [rate_at(past(after), s.at - timedelta(seconds=DAY)) for s in history(*[0.0] * 12)]
    today = history(*(max(0.0, v + level) for v in followed if v is not None))
    now = max(0.0, before[-1] + level)
    st_ = state(arrivals=today)
    base = past_period_rate(inputs(snap(request_rate=now, past_period=past(after)), st_), 300.0)
    assume(base is not None)  # clipped at zero, today may no longer follow the shape closely
    assert base is not None
    assert math.isfinite(base) and base >= 0
    raised = [v + more for v in after]
    higher = past_period_rate(inputs(snap(request_rate=now, past_period=past(raised)), st_), 300.0)
    assert higher is not None and higher >= base - 1e-6 * max(1.0, base)


def test_a_period_beyond_any_clock_is_refused_and_never_reaches_a_pass() -> None:
    # Go's duration (the API server's CEL) stops at 292 years and fails the rule on its own;
    # the models refuse it with the rule's message, and a look back that got one anyway fails
    # as a query would, without ending the pass
    huge = "99999999999999999999999999999h"
    with pytest.raises(ValidationError, match="forecastPeriod must be 0s \\(off\\) or from 15m"):
        spec(autoscaling={"forecastPeriod": huge})
    failures: list[QueryFailure] = []
    past = query_past_period(
        FakePrometheus(load("traffic-two-pods.json")), "team-a", "chat", window=120.0, now=T0,
        period=parse_duration(huge), on_error=failures.append,
    )  # fmt: skip
    assert past is None and [f.kind for f in failures] == ["unexpected"]
