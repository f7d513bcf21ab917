"""Looking ahead by the time a pod takes to become ready (docs/tuning.md, "Forecast").

A pod asked for now serves only once it is Ready, minutes later, so a scale-up that waits for
the SLO to be missed leaves it missed that long. The tuner therefore sizes for the arrivals
expected one ready time ahead:

- the ready time is learned from the service's own pods: the longest creation-to-Ready time of
  the pods that are Ready now (the adapters supply them in FleetView.ready_seconds), remembered
  in status.tuning.readyTime; `default_ready_time` until one pod was seen;
- the trend is a least-squares slope over the arrival rates of the passes within
  `forecast_window` (the short window: "over" must be seen early), or over its newer half when
  that is flatter: a trend that slows (a step the window has nearly taken in, a day near its
  peak) is not extrapolated at its old pace. Each rate is the snapshot's
  window mean, which lags a ramp by half the window, so the forecast looks `horizon + window/2`
  past it. Only a rising trend is extrapolated, and a forecast is at most
  `forecast_max_growth` x the present rate;
- the daily shape: when the snapshot carries the arrival rate one traffic period ago
  (`spec.autoscaling.forecastPeriod`, 24 h unless set; Prometheus keeps it) and the recent passes
  followed that period's shape (moved to today's level, within SHAPE_TOLERANCE of their mean),
  the forecast is at least that period's peak over the horizon, moved to today's level. It is
  measured, not extrapolated, so `forecast_max_growth` does not cap it: a ramp that came at this
  hour yesterday is met before today's trend shows it;
- a scale-down must fit the peak of the passes within `under_window` (the long window: "under"
  must hold for long) and the forecast; with a trusted shape, the shape stands for that peak: it
  says whether the load comes back within a pod ready time; and a load that fell through both
  halves of the long window (by `fall_rate` of its mean per minute at least) is past that peak,
  so the present stands for it.

The arrival samples live in status.tuning.window, so a restarted operator keeps its trend.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Literal

from vllm_operator.api.status import MAX_WINDOW_SAMPLES
from vllm_operator.tuning.capacity import model_estimate
from vllm_operator.tuning.inputs import Inputs
from vllm_operator.tuning.model import (
    RATE_MAX,
    FleetView,
    Forecast,
    MetricsSnapshot,
    PastPeriod,
    RateSample,
    ReadyTime,
    TuningState,
)
from vllm_operator.tuning.settings import TuningSettings

READY_TIME_MAX = 7200.0  # a longer "startup" is a pod that was stuck, not a load time
_MEASURED = ("ok", "partial")  # a partial snapshot still counts every arrival (only ready pods
# take traffic), so its rate is the service's


def learn_ready_time(
    known: ReadyTime | None, fleet: FleetView | None, now: datetime
) -> ReadyTime | None:
    """The longest creation-to-Ready time of the pods Ready now; else what was learned before."""
    seen = [s for s in (fleet.ready_seconds if fleet else ()) if math.isfinite(s) and s >= 0]
    if not seen:
        return known
    return ReadyTime(min(max(seen), READY_TIME_MAX), now)


def record_arrivals(
    state: TuningState,
    snapshot: MetricsSnapshot,
    now: datetime,
    settings: TuningSettings,
    capacity: float | None = None,
) -> tuple[RateSample, ...]:
    """The remembered arrival rates, with this pass's (when measured, with the engine model's
    `capacity` per pod that pass) and none too old."""
    keep = max(settings.forecast_window, settings.under_window)
    kept = [s for s in state.arrivals if now - keep <= s.at < now]
    rate = snapshot.request_rate
    if snapshot.quality in _MEASURED and rate is not None and math.isfinite(rate):
        kept.append(RateSample(now, rate, capacity))
    return tuple(kept[-MAX_WINDOW_SAMPLES:])


def observe(i: Inputs) -> Inputs:
    """The inputs with this pass's observations folded into the state: ready time, arrivals."""
    model = model_estimate(i)
    state = replace(
        i.state,
        ready_time=learn_ready_time(i.state.ready_time, i.snapshot.fleet, i.now),
        arrivals=record_arrivals(
            i.state, i.snapshot, i.now, i.settings, None if model is None else model.per_pod
        ),
    )
    return replace(i, state=state)


def extrapolate(rate: float, slope: float, seconds: float, window_seconds: float) -> float:
    """A rising trend carried `seconds` ahead; a window's rate is that of its middle, half a
    window back. A falling one is not carried: the present stands."""
    return rate + max(0.0, slope) * (seconds + window_seconds / 2)


def _recent(i: Inputs) -> list[RateSample]:
    return [s for s in i.state.arrivals if i.now - s.at <= i.settings.forecast_window]


def _tells_trend(recent: list[RateSample], fit: timedelta) -> bool:
    """Three passes over a third of the window at least: two points are a step, not a trend."""
    span = (recent[-1].at - recent[0].at) if recent else fit * 0
    return len(recent) >= 3 and span * 3 >= fit


def trend_known(i: Inputs) -> bool:
    """Whether the recent passes can tell a trend: a forecast without one (a service's first
    passes) says nothing of whether the load climbs."""
    return _tells_trend(_recent(i), i.settings.forecast_window)


def _slope(samples: list[RateSample]) -> float:
    """Least-squares requests/s per second; 0 when the samples cannot tell."""
    xs = [(s.at - samples[0].at).total_seconds() for s in samples]
    mean_x, mean_y = sum(xs) / len(xs), sum(s.rate for s in samples) / len(samples)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread <= 0:
        return 0.0
    slope = sum((x - mean_x) * (s.rate - mean_y) for x, s in zip(xs, samples, strict=True))
    return slope / spread if math.isfinite(slope / spread) else 0.0


def ready_horizon(i: Inputs) -> tuple[float, Literal["learned", "default"]]:
    known = i.state.ready_time
    if known is not None:
        return known.seconds, "learned"
    return i.settings.default_ready_time.total_seconds(), "default"


def forecast(i: Inputs) -> Forecast | None:
    """Arrivals one ready time ahead, from this pass's rate and the short trend; None unmeasured.

    Call on observed inputs (observe): the state's arrivals then end with this pass's rate.
    """
    rate = i.snapshot.request_rate
    if i.snapshot.quality not in _MEASURED or rate is None:
        return None
    fit = i.settings.forecast_window
    recent = _recent(i)
    slope = _slope(recent) if _tells_trend(recent, fit) else 0.0
    newer = [s for s in recent if i.now - s.at <= fit / 2]
    if slope > 0 and len(newer) >= 3:
        slope = max(0.0, min(slope, _slope(newer)))
    horizon, source = ready_horizon(i)
    ahead = extrapolate(rate, slope, horizon, i.snapshot.window_seconds)
    cap = i.settings.forecast_max_growth * max(rate, i.settings.min_request_rate)
    ahead = min(ahead, cap, RATE_MAX)
    shaped = past_period_rate(i, horizon)
    if shaped is not None:  # what came next last period beats a line through the last minutes
        ahead = shaped
    return Forecast(ahead, rate, slope, horizon, source, len(recent), shaped)


SHAPE_TOLERANCE = 0.25  # mean |recent - last period at today's level| / mean recent rate
SHAPE_MIN_PASSES = 5  # recent passes the shape is checked against: fewer cannot tell


def rate_at(past: PastPeriod, at: datetime) -> float | None:
    """The past rate at `at`, interpolated between its samples; None outside them."""
    rates = past.rates
    if not rates or not rates[0].at <= at <= rates[-1].at:
        return None
    for a, b in itertools.pairwise(rates):
        if a.at <= at <= b.at:
            span = (b.at - a.at).total_seconds()
            share = (at - a.at).total_seconds() / span
            return a.rate + (b.rate - a.rate) * share
    return rates[-1].rate  # a single sample, at exactly `at`


def past_period_rate(i: Inputs, horizon: float) -> float | None:
    """The last period's peak over the next `horizon` seconds, at today's level; None when the
    snapshot has no past period or the recent passes did not follow its shape.

    Call on observed inputs (observe): the recent passes are the state's arrivals. The level is
    the recent passes' mean difference from the same times one period ago (additive: a quiet
    night stays quiet when today runs busier). Both rates are window means: one reaches a step's
    new level a whole window after the step, so the peak is looked for up to `horizon + window`
    past now - period, and a burst that starts one ready time ahead is seen in full.
    """
    past = i.snapshot.past_period
    if past is None or i.snapshot.request_rate is None:
        return None
    back = timedelta(seconds=past.period)
    pairs = [
        (s.rate, then) for s in i.state.arrivals if (then := rate_at(past, s.at - back)) is not None
    ]
    if len(pairs) < SHAPE_MIN_PASSES:
        return None
    offset = sum(now - then for now, then in pairs) / len(pairs)
    miss = sum(abs(now - then - offset) for now, then in pairs) / len(pairs)
    level = max(sum(now for now, _ in pairs) / len(pairs), i.settings.min_request_rate)
    if miss > SHAPE_TOLERANCE * level:
        return None
    start = i.now - back
    end = start + timedelta(seconds=horizon + i.snapshot.window_seconds)
    ahead = [s.rate for s in past.rates if start <= s.at <= end]
    if not ahead:
        return None
    return min(max(0.0, max(ahead) + offset), RATE_MAX)


def under_rate(i: Inputs, ahead: Forecast | None) -> float | None:
    """The arrivals a scale-down must fit: the long window's peak, the present and the forecast.

    With a trusted shape (a forecast that has past_period_rate) the shape replaces the long
    window's peak: it knows whether the load returns within a ready time, the peak only guesses.
    A load falling through the whole long window (falling_share) fits the present instead.
    """
    rate = i.snapshot.request_rate
    if rate is None:
        return None
    if ahead is not None and ahead.past_period_rate is not None:
        return max(rate, ahead.rate)
    kept = _long_window(i)
    if falling_share(i) is not None:  # a declining load's past peak is behind it, not ahead
        kept = kept[-1:]
    peak = max((s.rate for s in kept), default=rate)
    return max(rate, peak, ahead.rate if ahead is not None else rate)


def _long_window(i: Inputs) -> list[RateSample]:
    return [s for s in i.state.arrivals if i.now - s.at <= i.settings.under_window]


def falling_share(i: Inputs) -> float | None:
    """How fast the arrivals fall (a share of the long window's mean per minute, > 0), when both
    halves of the long window fall by at least `fall_rate`; None otherwise.

    A load that has been falling for the whole long window is past its peak: the peak the window
    holds is behind it. A burst's end is not such a load: the window mean falls for one window
    and then stays flat, so the newer half does not fall. The passes must span most of the long
    window, so that a fall is not read from a few minutes of noise.
    """
    kept, window = _long_window(i), i.settings.under_window
    if len(kept) < 6 or kept[-1].at - kept[0].at < window * 0.8:
        return None
    mean = sum(s.rate for s in kept) / len(kept)
    if mean <= 0:
        return None
    half = len(kept) // 2
    slower = max(_slope(kept[:half]), _slope(kept[half:]))  # per second; the gentler fall
    share = -slower * 60 / mean
    return share if share >= i.settings.fall_rate else None


def under_phrase(i: Inputs) -> str:
    """What a scale-down was sized for, when it was not the long window's peak."""
    ahead = forecast(i)
    if ahead is not None and ahead.past_period_rate is not None:
        return f"; sized for {ahead.rate:.2f}/s, the peak one period ago at today's level"
    share = falling_share(i)
    if share is None:
        return ""
    minutes = i.settings.under_window.total_seconds() / 60
    return (
        f"; arrivals falling {share:.1%} per minute for {minutes:.0f} min: sized for the present,"
        " not that window's peak"
    )


RISING = 1.1  # a forecast 10% over the present is a trend; less is noise around a level


def rising(f: Forecast) -> bool:
    """The forecast says clearly more than the present: a trend, not noise around a level."""
    return f.rate > f.now_rate * RISING


def pods_coming(i: Inputs) -> int:
    """Pods the tuner asked for that are not Ready yet, and still within their expected start.

    They count as coming, not as a reason to hold. Pods the scheduler reports unschedulable,
    and pods not Ready after twice the ready time (a crash loop), are not coming.
    """
    fleet = i.snapshot.fleet
    if fleet is None or fleet.in_rollout or i.state.pending:
        return 0
    if fleet.desired != i.replicas or fleet.ready >= fleet.desired or fleet.ready < 1:
        return 0
    last = i.state.last_scale_at
    horizon, _ = ready_horizon(i)
    allowance = max(2 * horizon, i.settings.pod_ready_allowance.total_seconds())
    if last is None or (i.now - last).total_seconds() > allowance:
        return 0
    return max(0, fleet.desired - fleet.ready - fleet.unschedulable)


def forecast_phrase(f: Forecast) -> str:
    basis = (
        f"trend {f.slope * 60:+.3g}/s per min over {f.samples} passes"
        if f.past_period_rate is None
        else "the peak one period ago at today's level"
    )
    return (
        f"arrivals {f.now_rate:.2f}/s now, {f.rate:.2f}/s forecast in {f.horizon:.0f}s "
        f"({basis}, ready time {f.horizon:.0f}s {f.ready_time_source})"
    )
