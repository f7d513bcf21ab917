"""Looking ahead by the pod ready time (forecast.py, rule 8): learn the ready time, fit the trend,
scale to what the forecast needs, also while asked-for pods load; scale down only under the
long window's peak."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.tuning.support import T0, brief, history, snap, spec, state
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.forecast import forecast, learn_ready_time, observe, record_arrivals
from vllm_operator.tuning.inputs import Inputs
from vllm_operator.tuning.model import (
    Capacity,
    FleetView,
    MetricsSnapshot,
    RateSample,
    ReadyTime,
    TuningState,
)
from vllm_operator.tuning.persist import state_from_status, status_from_state
from vllm_operator.tuning.report import build_fleet_view, pod_ready_seconds
from vllm_operator.tuning.settings import TuningSettings

DEFAULTS = TuningSettings()
CAPACITY = Capacity(8.0, T0 - timedelta(minutes=10))  # 8 req/s per pod: 6.4 at 80%


def inputs(snapshot: MetricsSnapshot, st_: TuningState) -> Inputs:
    return observe(Inputs(spec(), snapshot, st_, T0, DEFAULTS, autotune_acts=False))


def test_the_ready_time_is_the_longest_creation_to_ready_of_the_ready_pods() -> None:
    fleet = FleetView(2, 2, 2, False, ready_seconds=(180.0, 250.0))
    assert learn_ready_time(None, fleet, T0) == ReadyTime(250.0, T0)
    # no pod to learn from: what was learned stays; nonsense figures are no observation
    known = ReadyTime(200.0, T0 - timedelta(hours=1))
    assert learn_ready_time(known, FleetView(2, 2, 2, False), T0) == known
    assert learn_ready_time(known, FleetView(2, 2, 2, False, (math.nan, -1.0)), T0) == known


def test_a_flat_history_forecasts_the_present_over_the_default_ready_time() -> None:
    ahead = forecast(inputs(snap(), state(arrivals=history(10.0, 10.0, 10.0, 10.0))))
    assert ahead is not None
    assert (ahead.rate, ahead.slope, ahead.horizon, ahead.ready_time_source) == (
        10.0, 0.0, 300.0, "default"
    )  # fmt: skip


def test_a_ramp_is_extrapolated_past_the_window_lag_by_the_learned_ready_time() -> None:
    # +0.5 req/s per pass (1/60 per second); window 120 s, ready time 240 s: 10 + (240 + 60)/60
    learned = state(arrivals=history(8.0, 8.5, 9.0, 9.5), ready_time=ReadyTime(240.0, T0))
    ahead = forecast(inputs(snap(), learned))
    assert ahead is not None
    assert math.isclose(ahead.slope, 1 / 60) and math.isclose(ahead.rate, 15.0)
    assert (ahead.horizon, ahead.ready_time_source, ahead.samples) == (240.0, "learned", 5)


def test_a_forecast_is_bounded_by_the_growth_cap() -> None:
    steep = state(arrivals=history(1.0, 3.0, 6.0, 8.0))
    ahead = forecast(inputs(snap(), steep))
    assert ahead is not None and ahead.rate == DEFAULTS.forecast_max_growth * 10.0


def test_arrivals_are_remembered_within_the_longest_window_and_bounded() -> None:
    old = history(*([5.0] * 100), step=5.0)  # 500 s of samples, 100 of them
    kept = record_arrivals(state(arrivals=old), snap(request_rate=7.0), T0, DEFAULTS)
    assert len(kept) == 64 and kept[-1] == RateSample(T0, 7.0)
    # a snapshot that measured nothing adds nothing
    assert record_arrivals(state(), snap(quality="missing"), T0, DEFAULTS) == ()


RISING = history(4.0, 6.0, 8.0, 9.0)  # ends at 10 req/s (the snapshot): ~+0.1/s per second


def test_a_rising_forecast_scales_to_what_it_needs() -> None:
    decision = decide(spec(), snap(), state(arrivals=RISING, capacity=CAPACITY), T0)
    # 15 req/s (the 1.5x cap) at 7.2 per pod (90% of 8): 3 replicas
    assert brief(decision) == ("ScaleReplicas", "ScaleUpForecast", "replicas", 2, 3)
    assert "15.00/s forecast in 300s" in decision.message
    assert "capacity 8.00/s, observed" in decision.message
    assert decision.forecast is not None and decision.forecast.rate == 15.0


def test_no_capacity_no_forecast_scale_up() -> None:
    decision = decide(spec(), snap(), state(arrivals=RISING), T0)
    assert decision.reason == "WithinSLO"
    assert decision.forecast is not None  # shown in status all the same


WIDE = spec(autoscaling={"maxReplicas": 8})


def _loading(last_scale: timedelta) -> tuple[MetricsSnapshot, TuningState]:
    """4 replicas asked for, 2 Ready and scraped: the snapshot is partial."""
    fleet = FleetView(desired=4, ready=2, updated=4, rolling=False)
    snapshot = snap(quality="partial", pods_expected=4, fleet=fleet, problem="2 of 4 scraped")
    st_ = state(desired_replicas=4, last_scale_at=T0 - last_scale, capacity=CAPACITY)
    return snapshot, st_


def test_asked_for_pods_count_as_coming_and_the_forecast_still_acts() -> None:
    steep = history(8.0, 12.0, 16.0, 20.0)  # 10 now: rising steeply
    snapshot, loading = _loading(timedelta(seconds=90))
    decision = decide(WIDE, replace(snapshot, request_rate=22.0),
                      replace(loading, arrivals=steep), T0)  # fmt: skip
    # 33 req/s (1.5 x 22) at 7.2 per pod (90% of 8): 5 replicas, beyond the 4 asked for
    assert brief(decision) == ("ScaleReplicas", "ScaleUpForecast", "replicas", 4, 5)
    assert decision.message.endswith("(2 asked-for pods coming)")


def test_coming_pods_that_cover_the_forecast_hold_and_say_so() -> None:
    snapshot, loading = _loading(timedelta(seconds=90))
    decision = decide(spec(), snapshot, replace(loading, arrivals=RISING), T0)
    assert decision.reason == "HoldMetricsPartial"
    assert "2 asked-for pods coming; arrivals 10.00/s now, 15.00/s forecast" in decision.message


def test_pods_stuck_past_twice_the_ready_time_are_not_coming() -> None:
    snapshot, stuck = _loading(timedelta(minutes=30))
    decision = decide(spec(), snapshot, replace(stuck, arrivals=history(8.0, 12.0, 16.0)), T0)
    assert decision.reason == "HoldMetricsPartial" and "coming" not in decision.message


LOW = {"running": 4.8, "waiting": 0.0, "ttft_p95": 0.3, "itl_p95": 0.02, "kv_usage": 0.4}


def test_a_scale_down_must_fit_the_long_windows_peak() -> None:
    quiet = snap(request_rate=4.0, **LOW)
    voted = state(scale_down_votes=3, capacity=CAPACITY)
    assert brief(decide(spec(), quiet, voted, T0))[1] == "ScaleDownLowLoad"
    # 7 req/s eight minutes ago: one pod would sit above 6.4 req/s, so no step down yet
    peak = history(7.0, *([4.0] * 15))
    assert brief(decide(spec(), quiet, replace(voted, arrivals=peak), T0))[1] == "WithinSLO"


def test_ready_time_arrivals_and_forecast_survive_the_status_round_trip() -> None:
    learned = state(arrivals=RISING, ready_time=ReadyTime(240.0, T0), capacity=CAPACITY)
    decision = decide(spec(), snap(), learned, T0)
    status = status_from_state(decision.state, decision, None, T0)
    assert status.ready_time is not None and status.ready_time.seconds == 240.0
    assert status.forecast is not None and status.forecast.horizon_seconds == 240.0
    assert state_from_status(status, spec()) == decision.state


rates = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)


@settings(derandomize=True, max_examples=150, deadline=None)
@given(
    past=st.lists(rates, max_size=12),
    now_rate=rates,
    ready=st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=4),
)
def test_the_forecast_is_finite_bounded_and_never_below_the_present(
    past: list[float], now_rate: float, ready: list[float]
) -> None:
    fleet = FleetView(2, 2, 2, False, ready_seconds=tuple(ready))
    i = inputs(snap(request_rate=now_rate, fleet=fleet), state(arrivals=history(*past)))
    ahead = forecast(i)
    assert ahead is not None and math.isfinite(ahead.rate) and math.isfinite(ahead.slope)
    cap = DEFAULTS.forecast_max_growth * max(now_rate, DEFAULTS.min_request_rate)
    assert now_rate <= ahead.rate <= max(now_rate, min(cap, 1e6))
    assert 0 <= ahead.horizon <= 7200
    decision = decide(spec(), i.snapshot, state(arrivals=history(*past), capacity=CAPACITY), T0)
    assert decision.reason  # any decision, no crash


@settings(derandomize=True, max_examples=100, deadline=None)
@given(past=st.lists(st.floats(0.0, 100.0), min_size=2, max_size=8), low=st.floats(0.0, 100.0),
       extra=st.floats(0.0, 100.0))  # fmt: skip
def test_more_arrivals_now_never_forecast_fewer(
    past: list[float], low: float, extra: float
) -> None:
    def ahead(rate: float) -> float:
        f = forecast(inputs(snap(request_rate=rate), state(arrivals=history(*past))))
        assert f is not None
        return f.rate

    assert ahead(low + extra) >= ahead(low) - 1e-9


@settings(derandomize=True, max_examples=60, deadline=None)
@given(past=st.lists(st.floats(0.0, 40.0), min_size=3, max_size=8), rate=st.floats(0.1, 40.0))
def test_the_forecast_rule_never_asks_for_fewer_replicas_with_more_load(
    past: list[float], rate: float
) -> None:
    def asked(r: float) -> int:
        d = decide(spec(), snap(request_rate=r), state(arrivals=history(*past), capacity=CAPACITY),
                   T0)  # fmt: skip
        return d.action.to_value or 2 if d.action.kind == "ScaleReplicas" else 2

    assert asked(rate * 1.5) >= asked(rate)


def test_pod_ready_seconds_reads_creation_to_ready_and_skips_what_cannot_tell() -> None:
    def pod(created: object, status: str = "True", at: object = "2026-01-01T00:04:00Z") -> dict:
        ready = {"type": "Ready", "status": status, "lastTransitionTime": at}
        return {"metadata": {"creationTimestamp": created}, "status": {"conditions": [ready]}}

    pods = [
        pod("2026-01-01T00:00:00Z"),  # 240 s
        pod("2026-01-01T00:00:00Z", status="False"),  # not Ready: no figure yet
        pod("2026-01-01T00:05:00Z"),  # Ready before it was created: clock skew, no figure
        pod(None),
        pod("garbage"),
        {"metadata": {}},
    ]
    assert pod_ready_seconds(pods) == (240.0,)
    fleet = build_fleet_view(
        {"spec": {"replicas": 1}, "status": {"replicas": 1, "readyReplicas": 1}}, pods
    )
    assert fleet is not None and fleet.ready_seconds == (240.0,)


def test_pod_ready_seconds_measures_a_restart_from_its_start_and_skips_a_readiness_flip() -> None:
    probe = {"startupProbe": {"periodSeconds": 10, "failureThreshold": 30}}  # 300 s to start

    def pod(ready_at: str, started: str, restarts: int, probe: dict = probe) -> dict:
        return {
            "metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "vllm", **probe}]},
            "status": {
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ready_at}],
                "containerStatuses": [
                    {"restartCount": restarts, "state": {"running": {"startedAt": started}}}
                ],
            },
        }

    first = pod("2026-01-01T00:04:00Z", "2026-01-01T00:00:30Z", 0)
    # crashed after an hour: the load is the new container's 200 s, not the pod's 3 h 20 s
    again = pod("2026-01-01T03:03:20Z", "2026-01-01T03:00:00Z", 1)
    # went unready under load and back 2 h later: no load took that long (startup probe: 300 s)
    flip = pod("2026-01-01T02:00:00Z", "2026-01-01T00:00:30Z", 0)
    # without a startup probe nothing bounds a load: the figure is taken as it is
    unbounded = pod("2026-01-01T00:20:00Z", "2026-01-01T00:00:30Z", 0, probe={})
    # restarted, but when the running container started is not known: no figure
    unknown = pod("2026-01-01T00:04:00Z", "garbage", 2)
    assert pod_ready_seconds([first, again, flip, unbounded, unknown]) == (200.0, 240.0, 1200.0)
