"""The arrival rate one traffic period back: one range query per tuning pass (docs/metrics.md).

Pure: the query, its span and the parsing of its answer; metrics/prometheus.py asks it.

The snapshot's request rate (admitted + refused, over the metrics window) evaluated by Prometheus
at PAST_STEP steps from PAST_BEFORE before `now - period` to PAST_AFTER after it: the recent
passes are checked against the first part (tuning/forecast.py: did today follow the shape?),
the forecast reads the second (what came next then). The benchmark's simulated Prometheus
answers the same span at the same steps (twin/vllm_twin/observe.py).

A period without data (a new service, a Prometheus that keeps less) gives no samples, and the
forecast is the trend alone. Samples that are not a rate (NaN, negative, beyond RATE_MAX) are
left out, not repaired: the interpolation then spans the gap.

The span: PAST_BEFORE is the tuner's under_window (the recent passes it keeps are checked
against it); PAST_AFTER the longest lookahead, a ready time and a window.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from vllm_operator.api.durations import parse_duration
from vllm_operator.api.rules import MIN_FORECAST_PERIOD
from vllm_operator.metrics.queries import build_admitted_rate, build_counter_rate
from vllm_operator.metrics.vectors import ResponseShapeError
from vllm_operator.tuning.model import PastPeriod, RateSample, check_figure
from vllm_operator.tuning.settings import TuningSettings

# seconds before now - period: the span of the recent passes the tuner keeps (under_window)
PAST_BEFORE: Final = TuningSettings().under_window.total_seconds()
# seconds after it: the longest horizon + a window looked ahead; the shortest period the API
# takes is this, so no sample is asked of the future
PAST_AFTER: Final = parse_duration(MIN_FORECAST_PERIOD)
PAST_STEP: Final = 60.0  # seconds between samples; the forecast interpolates between them


def past_span(now: datetime, period: float) -> tuple[datetime, datetime]:
    """First and last evaluation time of the past period's samples."""
    then = now - timedelta(seconds=period)
    return then - timedelta(seconds=PAST_BEFORE), then + timedelta(seconds=PAST_AFTER)


def build_request_rate(sel: str, rng: str) -> str:
    """Requests/s that reached the servers: finished plus refused (503), as the snapshot adds
    them; no series (nothing served yet) gives no answer rather than 0."""
    refused = build_counter_rate("vllm:admission_rejections_total", sel, rng)
    return f"{build_admitted_rate(sel, rng)} + ({refused} or vector(0))"


def parse_past_period(result: Any, period: float, now: datetime) -> PastPeriod:
    """`[{"metric": {}, "values": [[ts, "1.5"], ...]}]` -> PastPeriod; ResponseShapeError if the
    answer is not a range vector of at most one series. Samples at or after `now` are left out:
    Prometheus extrapolates a step in the future from the last scrape, which is no history."""
    if not isinstance(result, list):
        raise ResponseShapeError(f"expected a range vector (a list), got {type(result).__name__}")
    if len(result) > 1:
        raise ResponseShapeError(f"expected at most one series, got {len(result)}")
    if not result:
        return PastPeriod(period, ())
    values = result[0].get("values") if isinstance(result[0], dict) else None
    if not isinstance(values, list):
        raise ResponseShapeError(f"series without values: {result[0]!r:.120}")
    rates: list[RateSample] = []
    for pair in values:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], str)):
            raise ResponseShapeError(f'sample without a [time, "value"] pair: {pair!r:.120}')
        try:
            at, value = float(pair[0]), float(pair[1])
        except (TypeError, ValueError):
            raise ResponseShapeError(f"sample {pair!r:.60} is not a time and a number") from None
        if not math.isfinite(at) or check_figure("request_rate", value) is not None:
            continue
        moment = datetime.fromtimestamp(at, UTC)
        if moment >= now:
            continue
        if rates and moment <= rates[-1].at:
            raise ResponseShapeError("range vector samples are not in increasing time order")
        rates.append(RateSample(moment, value))
    return PastPeriod(period, tuple(rates))
