"""What Prometheus would see of a simulated fleet, and the MetricsSnapshot the operator builds.

The control-loop benchmark feeds `decide()` the same snapshot the operator would get, so this
module reproduces the chain scrape -> PromQL -> `metrics.snapshot.build_snapshot`:

- `PodHistograms` keeps one replica's `vllm:*` histograms (cumulative bucket counts with vLLM
  0.33's default bounds, `vllm_twin/server/buckets.py`), fed from finished requests; `ObservedFleet`
  is a Fleet that feeds them as requests finish.
- `ScrapeStore.scrape(now, targets)` records one scrape of every target: gauges, counters and
  buckets of a pod that answers, or a failed scrape (`None`, Prometheus' `up` 0): a pod still
  loading its model or draining after SIGTERM.
- `ScrapeStore.answers(now, window)` evaluates the operator's queries (docs/metrics.md) the way
  Prometheus does: `rate()` with its extrapolation to the window edges, `histogram_quantile()`
  interpolating inside buckets, `avg_over_time()` per series then summed, over the left-open
  range (now - window, now]; instant queries see only targets of the latest scrape (a vanished
  target's series are stale). Series of pods gone within the window still count in range
  queries, as in Prometheus.
- `observe_snapshot(...)` hands the answers to the operator's own `build_snapshot`, so quality
  verdicts (partial while new pods load, stale, no traffic) are the operator's.

Simplifications: every target is scraped at the same instants (Prometheus spreads them over the
interval); TTFT is observed when the request finishes, with the other per-request histograms
(vLLM observes it at the first token, so a scrape can lag by the request's decode time).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from vllm_operator.metrics.past_period import PAST_STEP, past_span
from vllm_operator.metrics.queries import (
    BURST_BIN_SECONDS,
    HISTOGRAMS,
    LENGTH_HISTOGRAMS,
    LENGTHS_LABEL,
    MIN_BURST_BINS,
    Figure,
)
from vllm_operator.metrics.snapshot import build_snapshot
from vllm_operator.metrics.vectors import Sample
from vllm_operator.sim.engine import RequestEvent, RequestRecord
from vllm_operator.sim.fleet import Fleet, Replica
from vllm_operator.tuning.model import FleetView, MetricsSnapshot, PastPeriod, RateSample
from vllm_twin.exposition import request_token_buckets
from vllm_twin.server import buckets
from vllm_twin.server.vllm_metrics import ADMISSION_REASONS

SCRAPE_INTERVAL = 15.0  # Prometheus' default scrape_interval is 1m; monitors usually set 15s
NAMESPACE, SERVICE = "bench", "svc"  # labels only: one service per store
QUANTILE = 0.95

# figure -> (bucket upper bounds, the record's value); histograms of docs/metrics.md
_BOUNDS: dict[str, tuple[float, ...]] = {
    "ttft_p95": buckets.TIME_TO_FIRST_TOKEN,
    "itl_p95": buckets.INTER_TOKEN_LATENCY,
    "queue_time_p95": buckets.REQUEST_LATENCY,
    "e2e_p95": buckets.REQUEST_LATENCY,
    # vllm:request_prompt_tokens / _generation_tokens: the 1-2-5 series up to max_model_len
    # (the benchmarks' 16384; a longer request lands in +Inf, as in vLLM)
    "prompt": tuple(request_token_buckets(16384)),
    "output": tuple(request_token_buckets(16384)),
}
_ONE_VALUE: dict[str, Callable[[RequestRecord], float]] = {
    "ttft_p95": lambda r: r.ttft,
    "queue_time_p95": lambda r: r.queue_time,
    "e2e_p95": lambda r: r.e2e,
    "prompt": lambda r: r.prompt_tokens,
    "output": lambda r: r.output_tokens,
}
_POD_GAUGES: tuple[tuple[Figure, str], ...] = (
    ("pod_running", "running"),
    ("pod_waiting", "waiting"),
    ("pod_kv_usage", "kv_usage"),
)
REJECTED = tuple(f"rejected:{reason}" for reason in ADMISSION_REASONS)


def _sum_counter(which: str) -> str:
    """The counter that holds a token histogram's `_sum`."""
    return f"sum:{which}"


COUNTERS = (
    "success", "preemptions", "prompt_tokens", *REJECTED, *map(_sum_counter, LENGTH_HISTOGRAMS)
)  # fmt: skip


class PodHistograms:
    """One pod's latency and token histograms: per-bucket counts, the +Inf bucket last."""

    def __init__(self) -> None:
        self.counts: dict[str, list[int]] = {f: [0] * (len(b) + 1) for f, b in _BOUNDS.items()}
        self.sums: dict[str, float] = {which: 0.0 for which in LENGTH_HISTOGRAMS}

    def observe(self, record: RequestRecord) -> None:
        for which in LENGTH_HISTOGRAMS:
            self.sums[which] += _ONE_VALUE[which](record)
        for figure, value_of in _ONE_VALUE.items():
            # `le` is inclusive: a value equal to a bound belongs to that bound's bucket
            self.counts[figure][bisect.bisect_left(_BOUNDS[figure], value_of(record))] += 1
        gaps = sorted(record.itls)  # one observation per gap, as vLLM's ITL histogram
        if gaps:
            counts, done = self.counts["itl_p95"], 0
            for i, bound in enumerate(_BOUNDS["itl_p95"]):
                upto = bisect.bisect_right(gaps, bound)
                counts[i] += upto - done
                done = upto
            counts[-1] += len(gaps) - done

    def cumulative(self) -> dict[str, tuple[int, ...]]:
        return {f: tuple(itertools.accumulate(c)) for f, c in self.counts.items()}


@dataclass(frozen=True)
class PodSample:
    """What one successful scrape of a pod returned."""

    time: float
    running: float
    waiting: float
    kv_usage: float
    counters: Mapping[str, float]  # COUNTERS
    buckets: Mapping[str, tuple[int, ...]]  # figure -> cumulative counts, +Inf last


# --------------------------------------------------------------------------- PromQL functions
def extrapolated_rate(points: Sequence[tuple[float, float]], start: float, end: float) -> float:
    """Prometheus' rate() of a counter over (start, end]; needs at least two points.

    Counter resets add the value before the reset. The increase is extrapolated towards each
    edge by up to half a mean sample interval (further only when the first/last sample sits
    within 1.1 intervals of the edge), and never below the counter's zero.
    """
    (t0, v0), (t1, v1) = points[0], points[-1]
    increase = v1 - v0
    for (_, before), (_, after) in itertools.pairwise(points):
        if after < before:
            increase += before
    sampled = t1 - t0
    average = sampled / (len(points) - 1)
    to_start, to_end = t0 - start, end - t1
    if to_start >= average * 1.1:
        to_start = average / 2
    if increase > 0 and v0 >= 0:
        to_start = min(to_start, sampled * v0 / increase)
    if to_end >= average * 1.1:
        to_end = average / 2
    return increase * (sampled + to_start + to_end) / sampled / (end - start)


def bucket_quantile(q: float, bounds: Sequence[float], cumulative: Sequence[float]) -> float:
    """histogram_quantile(q) over cumulative bucket values whose last one is the +Inf bucket."""
    total = cumulative[-1]
    if total <= 0 or math.isnan(total):
        return math.nan
    rank = q * total
    b = next(i for i, c in enumerate(cumulative) if c >= rank)
    if b == len(bounds):  # the +Inf bucket: Prometheus answers the highest finite bound
        return bounds[-1]
    start = 0.0 if b == 0 else bounds[b - 1]
    below = 0.0 if b == 0 else cumulative[b - 1]
    count = cumulative[b] - below
    return start + (bounds[b] - start) * ((rank - below) / count if count else 0.0)


# ------------------------------------------------------------------------------------- store
@dataclass
class ScrapeStore:
    """Samples per pod, kept `retention` seconds; the targets of the latest scrape."""

    retention: float = 900.0
    series: dict[str, list[PodSample]] = field(default_factory=dict)
    targets: dict[str, bool] = field(default_factory=dict)  # pod -> up at the latest scrape
    # pod -> the times of its staleness markers: Prometheus writes one into every series of a
    # target whose scrape fails or that left the targets, and an instant selector at or after it
    # finds nothing until the next sample
    stale: dict[str, list[float]] = field(default_factory=dict)

    def scrape(self, now: float, targets: Mapping[str, PodSample | None]) -> None:
        self.targets = {pod: sample is not None for pod, sample in targets.items()}
        for pod, samples in self.series.items():
            marks = self.stale.setdefault(pod, [])
            fresh = not marks or marks[-1] < samples[-1].time
            if targets.get(pod) is None and fresh:
                marks.append(now)
        for pod, sample in targets.items():
            if sample is not None:
                self.series.setdefault(pod, []).append(sample)
        horizon = now - self.retention
        for pod in list(self.series):
            kept = [s for s in self.series[pod] if s.time > horizon]
            if kept:
                self.series[pod] = kept
            else:
                del self.series[pod]
                self.stale.pop(pod, None)

    def answers(self, now: float, window: float) -> dict[Figure, list[Sample]]:
        """The instant vectors the operator's queries (queries.py) would get at `now`."""
        start = now - window
        ranged = {
            pod: in_range
            for pod, samples in self.series.items()
            if (in_range := [s for s in samples if start < s.time <= now])
        }
        out: dict[Figure, list[Sample]] = {
            "pod_up": [Sample({"pod": p}, 1.0 if up else 0.0) for p, up in self.targets.items()],
            "pod_sample_age": [
                Sample({"pod": p}, now - self.series[p][-1].time)
                for p, up in self.targets.items()
                if up and p in self.series
            ],
        }
        rates = _counter_rates(ranged, start, now)
        out["admitted_rate"] = _single(rates.get("success"))
        out["rejection_rate_by_reason"] = [
            Sample({"reason": reason}, rates[f"rejected:{reason}"])
            for reason in ADMISSION_REASONS
            if f"rejected:{reason}" in rates
        ]
        out["preemption_rate"] = _single(rates.get("preemptions"))
        success, prompt = rates.get("success"), rates.get("prompt_tokens")
        out["prompt_tokens_per_request"] = _single(
            None if success is None or prompt is None else _divide(prompt, success)
        )
        for figure in HISTOGRAMS:
            out[figure] = _single(_quantile(ranged, figure, start, now))
        out["lengths"] = [
            Sample({LENGTHS_LABEL: which, "le": "+Inf" if math.isinf(le) else str(le)}, value)
            for which in LENGTH_HISTOGRAMS
            for le, value in _bucket_rates(ranged, which, start, now)
        ] + [  # the histograms' _sum, without `le`
            Sample({LENGTHS_LABEL: which}, rates[_sum_counter(which)])
            for which in LENGTH_HISTOGRAMS
            if _sum_counter(which) in rates
        ]
        means = {
            gauge: {p: sum(getattr(s, gauge) for s in ss) / len(ss) for p, ss in ranged.items()}
            for gauge in ("running", "waiting", "kv_usage")
        }
        out["running"] = _single(sum(means["running"].values()) if ranged else None)
        out["waiting"] = _single(sum(means["waiting"].values()) if ranged else None)
        out["kv_usage"] = _single(max(means["kv_usage"].values()) if ranged else None)
        for figure, gauge in _POD_GAUGES:
            out[figure] = [Sample({"pod": p}, v) for p, v in means[gauge].items()]
        if window >= MIN_BURST_BINS * BURST_BIN_SECONDS:
            out["arrival_dispersion"] = _single(self.arrival_dispersion(now, window))
        return out

    def arrival_dispersion(self, now: float, window: float) -> float | None:
        """build_arrival_dispersion's answer: over the subquery's steps (multiples of the bin
        in (now - window, now]), the mean of (count - the bin before's count)^2 without the
        largest, over twice the mean count; a count (`_count`) is, summed over the pods, the
        counter's newest value at the step less its newest value a bin earlier, never below 0,
        and a step has none where the pods that answer differ between the two instants (a pod
        whose scrape failed or that left is stale, as in Prometheus)."""
        b = float(BURST_BIN_SECONDS)
        last = math.floor(now / b) * b
        steps = [last - k * b for k in range(int(window // b) + 1) if last - k * b > now - window]
        counts = {t: c for t in steps if (c := self._count(t, b)) is not None}
        changes = [
            (c - before) ** 2
            for t, c in counts.items()
            if (before := self._count(t - b, b)) is not None
        ]
        if not counts or not changes:
            return None
        return dispersion_of(list(counts.values()), changes)

    def _count(self, at: float, bin_seconds: float) -> float | None:
        """build_arrival_dispersion's count at `at`: summed over the pods, each one's counter at
        `at` less its value a bin earlier, never below 0; None unless the same pods answer at
        both instants (a pod that came or went in the bin would count a part of it)."""
        now = self._values_at(at)
        then = self._values_at(at - bin_seconds)
        if not now or now.keys() != then.keys():
            return None
        return sum(max(0.0, v - then[pod]) for pod, v in now.items())

    def _values_at(self, at: float) -> dict[str, float]:
        """The success counter of every pod an instant selector finds at `at`."""
        return {
            pod: v
            for pod, samples in self.series.items()
            if (v := _newest(samples, self.stale.get(pod, ()), at)) is not None
        }

    def request_rate(self, at: float, window: float) -> float | None:
        """metrics/past_period.py's query at `at`: finished plus refused requests/s over the
        window; None when no series has two samples in it (nothing kept that far back)."""
        start = at - window
        ranged = {
            pod: in_range
            for pod, samples in self.series.items()
            if (in_range := [s for s in samples if start < s.time <= at])
        }
        rates = _counter_rates(ranged, start, at)
        if "success" not in rates:
            return None
        return rates["success"] + sum(rates.get(name, 0.0) for name in REJECTED)


def dispersion_of(counts: Sequence[float], changes: Sequence[float]) -> float:
    """build_arrival_dispersion's arithmetic: the mean of the squared `changes` between
    neighbouring counts without the largest, over twice the mean of `counts` (NaN for 0 / 0,
    as PromQL)."""
    kept = _divide(sum(changes) - max(changes), len(changes) - 1)
    return _divide(kept, 2 * sum(counts) / len(counts))


LOOKBACK = 300.0  # Prometheus' lookback delta: an instant selector's newest sample this recent


def _newest(samples: Sequence[PodSample], stale: Sequence[float], at: float) -> float | None:
    """The success counter's newest sample at or before `at`, within the lookback and with no
    staleness marker after it."""
    k = bisect.bisect_right([s.time for s in samples], at)
    if k == 0 or samples[k - 1].time <= at - LOOKBACK:
        return None
    newest = samples[k - 1]
    if any(newest.time < t <= at for t in stale):
        return None
    return newest.counters["success"]


def _counter_rates(
    ranged: Mapping[str, list[PodSample]], start: float, end: float
) -> dict[str, float]:
    """sum(rate(counter)) per counter; absent when no series has two samples in range."""
    out: dict[str, float] = {}
    for samples in ranged.values():
        if len(samples) < 2:
            continue
        for name in COUNTERS:
            points = [(s.time, s.counters[name]) for s in samples]
            out[name] = out.get(name, 0.0) + extrapolated_rate(points, start, end)
    return out


def _bucket_rates(
    ranged: Mapping[str, list[PodSample]], figure: str, start: float, end: float
) -> list[tuple[float, float]]:
    """sum by (le) (rate(bucket)) as (le, value) pairs, +Inf last; empty without any series."""
    summed = _summed_rates(ranged, figure, start, end)
    if summed is None:
        return []
    return list(zip((*_BOUNDS[figure], math.inf), summed, strict=True))


def _summed_rates(
    ranged: Mapping[str, list[PodSample]], figure: str, start: float, end: float
) -> list[float] | None:
    summed: list[float] | None = None
    for samples in ranged.values():
        if len(samples) < 2:
            continue
        width = len(samples[0].buckets[figure])
        rates = [
            extrapolated_rate([(s.time, s.buckets[figure][i]) for s in samples], start, end)
            for i in range(width)
        ]
        summed = rates if summed is None else [a + b for a, b in zip(summed, rates, strict=True)]
    return summed


def _quantile(
    ranged: Mapping[str, list[PodSample]], figure: str, start: float, end: float
) -> float | None:
    """histogram_quantile(0.95, sum by (le) (rate(bucket))); None without any series."""
    summed = _summed_rates(ranged, figure, start, end)
    if summed is None:
        return None
    # Extrapolation towards zero differs per bucket, so the sum can dip: Prometheus carries the
    # maximum forward before interpolating (ensureMonotonic).
    return bucket_quantile(QUANTILE, _BOUNDS[figure], list(itertools.accumulate(summed, max)))


def _divide(a: float, b: float) -> float:
    # PromQL division: x/0 is +Inf, 0/0 is NaN
    if b:
        return a / b
    return math.nan if a == 0 else math.inf


def _single(value: float | None) -> list[Sample]:
    return [] if value is None else [Sample({}, value)]


# ------------------------------------------------------------------------------ the fleet
def pod_name(replica_id: int) -> str:
    return f"vllm-{replica_id}"


class ObservedFleet(Fleet):
    """A Fleet whose finished requests feed each replica's histograms as they finish.

    Finished events are tapped where the engines produce them (`_advance_engines`): the public
    `advance_to` also re-delivers events buffered during resizes, which would count them twice.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.histograms: dict[int, PodHistograms] = {}
        super().__init__(*args, **kwargs)

    def _advance_engines(self, now: float) -> list[tuple[int, RequestEvent]]:
        out = super()._advance_engines(now)
        for replica, event in out:
            if event.record is not None:
                self.histograms.setdefault(replica, PodHistograms()).observe(event.record)
        return out


def read_pod(replica: Replica, histograms: PodHistograms | None, now: float) -> PodSample:
    stats = replica.engine.stats()
    counters = {
        "success": float(sum(stats.request_success.values())),
        "preemptions": float(stats.preemptions),
        "prompt_tokens": float(stats.prompt_tokens),
    }
    for reason in ADMISSION_REASONS:
        counters[f"rejected:{reason}"] = float(stats.rejections.get(reason, 0))
    seen = histograms or PodHistograms()
    for which in LENGTH_HISTOGRAMS:
        counters[_sum_counter(which)] = seen.sums[which]
    return PodSample(
        time=now,
        running=float(stats.num_running),
        waiting=float(stats.num_waiting),
        kv_usage=stats.kv_usage,
        counters=counters,
        buckets=seen.cumulative(),
    )


def scrape_fleet(store: ScrapeStore, fleet: ObservedFleet, now: float) -> None:
    """One scrape of every pod: only ready replicas answer (loading and draining ones refuse).

    Call it with the fleet advanced to `now` (the runner's on_tick is), so gauges are current.
    """
    store.scrape(
        now,
        {
            pod_name(r.id): read_pod(r, fleet.histograms.get(r.id), now)
            if r.state == "ready"
            else None
            for r in fleet.live
        },
    )


def fleet_view(fleet: Fleet) -> FleetView:
    """The Deployment's status: desired = replicas asked for, updated = on the current flags."""
    active = fleet.active
    updated = sum(1 for r in active if r.config == fleet.config)
    ready = sum(1 for r in active if r.state == "ready")
    return FleetView(
        desired=len(active), ready=ready, updated=updated, rolling=updated < len(active)
    )


def past_period(
    store: ScrapeStore, now: float, *, window: float, period: float, epoch: datetime
) -> PastPeriod:
    """What query_past_period would get at virtual time `now`: the request rate at PAST_STEP
    steps over past_span, the steps before the store's first samples left out."""
    start, end = past_span(epoch + timedelta(seconds=now), period)
    first, last = (start - epoch).total_seconds(), (end - epoch).total_seconds()
    steps = int((last - first) // PAST_STEP) + 1
    rates = (
        (at, store.request_rate(at, window))
        for at in (first + k * PAST_STEP for k in range(steps))
        if at < now  # as parse_past_period: no sample of the future
    )
    samples = tuple(
        RateSample(epoch + timedelta(seconds=at), rate) for at, rate in rates if rate is not None
    )
    return PastPeriod(period, samples)


def observe_snapshot(
    store: ScrapeStore,
    fleet: Fleet,
    now: float,
    *,
    window: float,
    epoch: datetime,
    stale_after: float,
    period: float | None = None,
) -> MetricsSnapshot:
    """The snapshot the operator's tuning pass would build at virtual time `now`; with `period`,
    with the past period the operator's range query would add (handlers/tune.py)."""
    view = fleet_view(fleet)
    snapshot = build_snapshot(
        store.answers(now, window),
        namespace=NAMESPACE,
        name=SERVICE,
        window_seconds=window,
        now=epoch + timedelta(seconds=now),
        expected_pods=view.desired,
        fleet=view,
        stale_after=stale_after,
    )
    if period is None:
        return snapshot
    past = past_period(store, now, window=window, period=period, epoch=epoch)
    return replace(snapshot, past_period=past)
