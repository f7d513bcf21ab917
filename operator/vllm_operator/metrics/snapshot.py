"""Query answers -> MetricsSnapshot with its quality verdict (pure; docs/metrics.md "Verdicts").

Verdicts, most severe first: missing (no engine samples at all), stale (the newest sample is older
than `stale_after`), invalid (a figure Prometheus should never produce: negative, NaN or Inf where
requests finished, beyond its plausible bound such as KV usage above 1, or no latency histogram
at all while requests finish), partial (fewer pods scraped than expected), ok. The adapter
adds "error" when a query itself fails. A figure that fails its check is left out (None), so no
NaN ever reaches the tuner.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from vllm_operator.metrics.queries import LENGTHS_LABEL, SERVICE_LABEL, Figure, LengthsOf
from vllm_operator.metrics.vectors import Sample, le_buckets
from vllm_operator.planning.lengths import Empirical, empirical_from_buckets
from vllm_operator.tuning.model import (
    PLAUSIBLE_MAX,
    FleetView,
    MetricsSnapshot,
    PodFigures,
    Quality,
)

# Figures computed over finished requests: with none finished in the window, Prometheus answers
# NaN (histogram_quantile over empty buckets, 0/0), which means "no traffic", not bad data.
TRAFFIC_FIGURES: frozenset[Figure] = frozenset(
    {"ttft_p95", "itl_p95", "queue_time_p95", "e2e_p95", "prompt_tokens_per_request"}
)
_LATENCIES: tuple[Figure, ...] = ("ttft_p95", "itl_p95", "queue_time_p95", "e2e_p95")
_SCALARS: tuple[Figure, ...] = (
    "ttft_p95", "itl_p95", "queue_time_p95", "e2e_p95", "waiting", "running", "kv_usage",
    "preemption_rate", "prompt_tokens_per_request",
)  # fmt: skip


@dataclass
class _Checker:
    """Keeps the figures that pass and says, once each, why the others did not."""

    admitted: float | None = None
    problems: list[str] = field(default_factory=list)

    def clean(
        self,
        label: str,
        value: float | None,
        *,
        traffic_only: bool = False,
        figure: str | None = None,
    ) -> float | None:
        """`value` if it can be figure `figure` (default: `label`, a MetricsSnapshot field)."""
        upper = PLAUSIBLE_MAX.get(figure or label, math.inf)
        if value is None:
            return None
        if not math.isfinite(value):
            if traffic_only and not (self.admitted and self.admitted > 0):
                return None
            where = f" while {self.admitted:.3g} requests/s finished" if traffic_only else ""
            self.problems.append(f"{label} is {_show(value)}{where}")
        elif value < 0:
            self.problems.append(f"{label} is negative ({value:.3g})")
        elif value > upper:
            self.problems.append(f"{label} is {value:.3g}, above {upper:g}")
        else:
            return value
        return None


def build_snapshot(
    results: Mapping[Figure, Sequence[Sample]],
    *,
    namespace: str,
    name: str,
    window_seconds: float,
    now: datetime,
    expected_pods: int,
    fleet: FleetView | None,
    stale_after: float,
) -> MetricsSnapshot:
    """The snapshot the answers describe (the SINGLE_SERIES figures hold at most one sample)."""
    service = f"{namespace}/{name}"
    up = _by_pod(results["pod_up"])
    ages = _by_pod(results["pod_sample_age"])
    if not ages:
        return MetricsSnapshot(
            observed_at=now,
            window_seconds=window_seconds,
            quality="missing",
            problem=_missing_problem(service, namespace, name, up, expected_pods),
            pods_expected=expected_pods,
            fleet=fleet,
            pods=tuple(PodFigures(pod=p, up=v == 1) for p, v in sorted(up.items())),
        )

    check = _Checker()
    check.admitted = check.clean("admitted_rate", _single(results, "admitted_rate"))
    # Each figure's bounds: PLAUSIBLE_MAX (kv_usage is a fraction, docs/vllm-0.33.md §3.2).
    figures = {
        f: check.clean(f, _single(results, f), traffic_only=f in TRAFFIC_FIGURES) for f in _SCALARS
    }
    by_reason = {
        reason: value
        for s in results["rejection_rate_by_reason"]
        if (reason := s.labels.get("reason", ""))
        if (value := check.clean(f"rejection rate {reason}", s.value, figure="rejection_rate"))
        is not None
    }
    # Finished requests always land in the histograms: none at all means a broken scrape.
    if check.admitted and all(_single(results, f) is None for f in _LATENCIES):
        check.problems.append(
            f"no latency histogram answers ({', '.join(_LATENCIES)}) while "
            f"{check.admitted:.3g} requests/s finished"
        )
    newest = check.clean("newest sample age", min(ages.values()))
    pods = _pod_figures(results, up, ages, check)
    scraped = sum(
        1 for p in pods if p.up and p.sample_age is not None and p.sample_age <= stale_after
    )
    rejection_rate = check.clean("rejection_rate", sum(by_reason.values()) if by_reason else None)
    request_rate = check.clean(
        "request_rate",
        check.admitted + rejection_rate
        if check.admitted is not None and rejection_rate is not None
        else None,
    )
    dispersion = _dispersion(results, check)
    quality, problem = _verdict(
        service, check.problems, newest, stale_after, scraped, expected_pods, pods
    )
    return MetricsSnapshot(
        observed_at=now,
        window_seconds=window_seconds,
        quality=quality,
        problem=problem,
        pods_expected=expected_pods,
        pods_scraped=scraped,
        request_rate=request_rate,
        rejection_rate=rejection_rate,
        rejection_ratio=_ratio(rejection_rate, request_rate),
        ttft_p95=figures["ttft_p95"],
        itl_p95=figures["itl_p95"],
        queue_time_p95=figures["queue_time_p95"],
        e2e_p95=figures["e2e_p95"],
        waiting=figures["waiting"],
        running=figures["running"],
        kv_usage=figures["kv_usage"],
        preemption_rate=figures["preemption_rate"],
        prompt_tokens_per_request=figures["prompt_tokens_per_request"],
        pods=pods,
        fleet=fleet,
        admitted_rate=check.admitted,
        rejection_rate_by_reason=by_reason,
        sample_age=newest,
        prompt_lengths=_lengths(results, "prompt"),
        output_lengths=_lengths(results, "output"),
        arrival_dispersion=dispersion,
    )


def _dispersion(results: Mapping[Figure, Sequence[Sample]], check: _Checker) -> float | None:
    """The window's arrival dispersion; None when not asked (a short window) or not a number.
    Its aligned 30 s bins can miss the few seconds since the last one, so a service whose first
    requests finished just now has traffic and a dispersion of 0 / 0: NaN means "not measured"
    here, and the model replays plain Poisson arrivals."""
    samples = results.get("arrival_dispersion", ())
    value = samples[0].value if samples else None
    if value is None or math.isnan(value):
        return None
    return check.clean("arrival_dispersion", value)


def _verdict(
    service: str,
    problems: list[str],
    newest: float | None,
    stale_after: float,
    scraped: int,
    expected: int,
    pods: tuple[PodFigures, ...],
) -> tuple[Quality, str | None]:
    if newest is not None and newest > stale_after:
        return "stale", (
            f"The newest engine sample of {service} is {newest:.0f}s old"
            f" (stale after {stale_after:g}s)."
        )
    if problems:
        return "invalid", f"Prometheus gave unusable figures for {service}: {'; '.join(problems)}."
    if scraped < expected:
        return "partial", _partial_problem(service, scraped, expected, pods, stale_after)
    return "ok", None


def _missing_problem(
    service: str, namespace: str, name: str, up: Mapping[str, float], expected: int
) -> str:
    if up:
        down = sum(1 for v in up.values() if v != 1)
        if down == len(up):
            return f"All {len(up)} scrape targets of {service} are down (up=0)."
        return (
            f"Prometheus scrapes {len(up)} targets of {service} ({down} down) but has no vllm:*"
            " samples from them; is --disable-log-stats set?"
        )
    if expected == 0:
        return f"{service} has no pods to measure (0 expected)."
    return (
        f'Prometheus has no series labelled namespace="{namespace}", {SERVICE_LABEL}="{name}";'
        " is the VLLMService's PodMonitor or ServiceMonitor installed and scraped?"
    )


def _partial_problem(
    service: str, scraped: int, expected: int, pods: tuple[PodFigures, ...], stale_after: float
) -> str:
    why: list[str] = []
    for pod in pods:
        if not pod.up:
            why.append(f"{pod.pod} is down")
        elif pod.sample_age is None:
            why.append(f"{pod.pod} has no engine samples")
        elif pod.sample_age > stale_after:
            why.append(f"{pod.pod} was last sampled {pod.sample_age:.0f}s ago")
    unseen = expected - len(pods)
    if unseen > 0:
        why.append(f"{unseen} expected pod{'s have' if unseen > 1 else ' has'} no series")
    return f"Only {scraped} of {expected} expected pods of {service} are scraped: {', '.join(why)}."


def _pod_figures(
    results: Mapping[Figure, Sequence[Sample]],
    up: Mapping[str, float],
    ages: Mapping[str, float],
    check: _Checker,
) -> tuple[PodFigures, ...]:
    running = _by_pod(results["pod_running"])
    waiting = _by_pod(results["pod_waiting"])
    kv = _by_pod(results["pod_kv_usage"])
    names = sorted({*up, *ages, *running, *waiting, *kv})
    return tuple(
        PodFigures(
            pod=pod,
            running=check.clean(f"running of {pod}", running.get(pod), figure="running"),
            waiting=check.clean(f"waiting of {pod}", waiting.get(pod), figure="waiting"),
            kv_usage=check.clean(f"kv_usage of {pod}", kv.get(pod), figure="kv_usage"),
            up=None if pod not in up else up[pod] == 1,
            sample_age=check.clean(f"sample age of {pod}", ages.get(pod)),
        )
        for pod in names
    )


def _lengths(results: Mapping[Figure, Sequence[Sample]], which: LengthsOf) -> Empirical | None:
    """One token histogram of the `lengths` answer; None when it holds no finished request."""
    samples = [s for s in results.get("lengths", ()) if s.labels.get(LENGTHS_LABEL) == which]
    buckets = [(le, v) for le, v in le_buckets(samples) if math.isfinite(v) and v >= 0]
    sums = [s.value for s in samples if "le" not in s.labels]
    try:  # a missing or unusable _sum leaves the mean to the buckets
        return empirical_from_buckets(buckets, sums[0] if len(sums) == 1 else None)
    except ValueError:  # no observations in the window
        return None


def _by_pod(samples: Sequence[Sample]) -> dict[str, float]:
    # The queries aggregate `by (pod)`; a series without the label (a broken relabelling) still
    # counts, under the empty name, rather than vanishing from the verdict.
    return {s.labels.get("pod", ""): s.value for s in samples}


def _show(value: float) -> str:
    # As Prometheus writes them, not Python's "nan"/"inf".
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


def _ratio(part: float | None, whole: float | None) -> float | None:
    # No requests at all leaves the share undefined: None, never 0.
    return part / whole if part is not None and whole else None


def _single(results: Mapping[Figure, Sequence[Sample]], figure: Figure) -> float | None:
    samples = results[figure]
    return samples[0].value if samples else None
