"""PromQL for one VLLMService's figures: pure string builders (docs/metrics.md lists them all).

The label contract: a VLLMService's series are those with `namespace="<ns>"` and
`serving_vllmop_io_vllmservice="<name>"`. The PodMonitor/ServiceMonitor copies the pod label
LABEL_SERVICE onto every target with podTargetLabels, and Prometheus turns each character a label
name may not hold into `_`; `namespace` and `pod` come from the Prometheus Operator's relabelling.

Names are checked against the Kubernetes rules before they reach a query, so a value can never
close its string literal and add PromQL of its own.
"""

from __future__ import annotations

import math
import re
from typing import Final, Literal

from vllm_operator.constants import LABEL_CANARY, LABEL_SERVICE


def sanitize_label_name(kube_label: str) -> str:
    """The Prometheus label name a Kubernetes label becomes (as podTargetLabels does it)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", kube_label)


SERVICE_LABEL: Final = sanitize_label_name(LABEL_SERVICE)  # serving_vllmop_io_vllmservice
CANARY_LABEL: Final = sanitize_label_name(LABEL_CANARY)  # serving_vllmop_io_canary

# A namespace is a DNS-1123 label; the VLLMService name travels as a pod label value, so it must
# be a DNS-1123 subdomain that also fits a label value (63 characters).
_NAMESPACE: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_NAME: Final = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_MAX_LEN: Final = 63

QUANTILE: Final = 0.95

# Figure keys, in the order query_snapshot asks for them: the pod-level liveness first, so a
# service that is not scraped at all costs one failed query when Prometheus is down.
Figure = Literal[
    "pod_up",
    "pod_sample_age",
    "admitted_rate",
    "rejection_rate_by_reason",
    "ttft_p95",
    "itl_p95",
    "queue_time_p95",
    "e2e_p95",
    "waiting",
    "running",
    "kv_usage",
    "preemption_rate",
    "prompt_tokens_per_request",
    "pod_running",
    "pod_waiting",
    "pod_kv_usage",
    "lengths",
    "arrival_dispersion",
]

# Figures answered by a plain sum/max/quantile: at most one series, without labels.
SINGLE_SERIES: Final[frozenset[Figure]] = frozenset(
    {
        "admitted_rate", "ttft_p95", "itl_p95", "queue_time_p95", "e2e_p95", "waiting",
        "running", "kv_usage", "preemption_rate", "prompt_tokens_per_request",
        "arrival_dispersion",
    }
)  # fmt: skip

# Histograms behind the p95 figures (docs/vllm-0.33.md §3.2); each has `_bucket` series with `le`.
HISTOGRAMS: Final[dict[Figure, str]] = {
    "ttft_p95": "vllm:time_to_first_token_seconds",
    "itl_p95": "vllm:inter_token_latency_seconds",
    "queue_time_p95": "vllm:request_queue_time_seconds",
    "e2e_p95": "vllm:e2e_request_latency_seconds",
}

# The per-request token histograms (docs/vllm-0.33.md §3.3): what the clients sent and got back.
PROMPT_HISTOGRAM: Final = "vllm:request_prompt_tokens"
OUTPUT_HISTOGRAM: Final = "vllm:request_generation_tokens"
# The `lengths` answer tells the two histograms apart by this label's value.
LENGTHS_LABEL: Final = "histogram"
LengthsOf = Literal["prompt", "output"]
LENGTH_HISTOGRAMS: Final[dict[LengthsOf, str]] = {
    "prompt": PROMPT_HISTOGRAM,
    "output": OUTPUT_HISTOGRAM,
}


# Which of a service's pods a query covers: all, the canary pod, or every pod but the canary
# (a series without the canary label matches `!="true"`, so pods from before canaries count).
PodGroup = Literal["all", "canary", "stable"]
_GROUP_MATCHERS: Final[dict[PodGroup, str]] = {
    "all": "",
    "canary": f',{CANARY_LABEL}="true"',
    "stable": f',{CANARY_LABEL}!="true"',
}


def build_selector(namespace: str, name: str, group: PodGroup = "all") -> str:
    """`{namespace="ns",serving_vllmop_io_vllmservice="name"}`, narrowed to a pod group;
    ValueError for a bad name."""
    _check(namespace, _NAMESPACE, "namespace", "lower-case letters, digits and '-'")
    _check(name, _NAME, "VLLMService name", "lower-case letters, digits, '-' and '.'")
    return f'{{namespace="{namespace}",{SERVICE_LABEL}="{name}"{_GROUP_MATCHERS[group]}}}'


def _check(value: str, pattern: re.Pattern[str], what: str, allowed: str) -> None:
    if len(value) > _MAX_LEN or not pattern.fullmatch(value):
        raise ValueError(
            f"{what} {value!r} is not a Kubernetes name: {allowed}, starting and ending with a"
            f" letter or digit, at most {_MAX_LEN} characters"
        )


def build_range(window_seconds: float) -> str:
    """A PromQL range: whole seconds as `300s`, otherwise milliseconds (`1500ms`)."""
    if not math.isfinite(window_seconds) or window_seconds <= 0:
        raise ValueError(f"window must be a positive number of seconds, got {window_seconds!r}")
    millis = round(window_seconds * 1000)
    if millis < 1:
        raise ValueError(f"window {window_seconds!r}s is shorter than PromQL's 1ms resolution")
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


def build_counter_rate(counter: str, sel: str, rng: str) -> str:
    """A counter's per-second increase over the window, summed over pods (and label values)."""
    return f"sum(rate({counter}{sel}[{rng}]))"


def build_admitted_rate(sel: str, rng: str) -> str:
    """Requests/s the engine finished, whatever the finish reason (stop, length, abort, ...)."""
    return build_counter_rate("vllm:request_success_total", sel, rng)


def build_rejection_rate_by_reason(sel: str, rng: str) -> str:
    """503 admission rejections/s per reason (max_num_queued_reqs, max_num_queued_tokens)."""
    return f"sum by (reason) (rate(vllm:admission_rejections_total{sel}[{rng}]))"


def build_quantile(histogram: str, sel: str, rng: str, q: float = QUANTILE) -> str:
    """The q-quantile over every pod's observations in the window."""
    return f"histogram_quantile({q}, sum by (le) (rate({histogram}_bucket{sel}[{rng}])))"


def build_fleet_mean(gauge: str, sel: str, rng: str) -> str:
    """A gauge's mean over the window, summed over pods (and engines)."""
    return f"sum(avg_over_time({gauge}{sel}[{rng}]))"


def build_kv_usage(sel: str, rng: str) -> str:
    """The fullest pod's mean KV-cache usage over the window (0-1)."""
    return f"max(avg_over_time(vllm:kv_cache_usage_perc{sel}[{rng}]))"


def build_pod_mean(gauge: str, sel: str, rng: str, agg: str = "sum") -> str:
    """A gauge's mean over the window per pod; `agg` joins a pod's engines (DP ranks)."""
    return f"{agg} by (pod) (avg_over_time({gauge}{sel}[{rng}]))"


def build_prompt_tokens_per_request(sel: str, rng: str) -> str:
    """Mean prompt length of finished requests; NaN (0/0) when none finished."""
    return (
        f"{build_counter_rate('vllm:prompt_tokens_total', sel, rng)}"
        f" / {build_admitted_rate(sel, rng)}"
    )


def build_lengths(sel: str, rng: str) -> str:
    """Both token histograms' bucket rates summed over pods, and their `_sum` rates, in one query
    (one round trip per service, however many histograms): each series has LENGTHS_LABEL, the
    buckets `le`, the sums no `le` (their mean is `_sum` / the +Inf bucket)."""
    parts = [
        part
        for which, histogram in LENGTH_HISTOGRAMS.items()
        for part in (
            f"label_replace(sum by (le) (rate({histogram}_bucket{sel}[{rng}])),"
            f' "{LENGTHS_LABEL}", "{which}", "", "")',
            f"label_replace(sum(rate({histogram}_sum{sel}[{rng}])),"
            f' "{LENGTHS_LABEL}", "{which}", "", "")',
        )
    ]
    return " or ".join(parts)


# How bursty arrivals are is read from finished requests counted per BURST_BIN_SECONDS; a window
# of fewer than MIN_BURST_BINS such bins gives too few counts to tell bursts from chance, and is
# not asked.
BURST_BIN_SECONDS: Final = 30
MIN_BURST_BINS: Final = 8


def _bin_count(m: str, at: str, earlier: str) -> str:
    """The finished requests of one bin: `m{at}` less `m{earlier}` (offset modifiers), summed
    over the series, and only where the same series are present at both instants (the pairs
    are as many as the series at each)."""
    pairs = f"({m}{at} - {m}{earlier})"
    return (
        f"(sum(clamp_min({pairs}, 0))"
        f" and on() (count({pairs}) == count({m}{at}))"
        f" and on() (count({pairs}) == count({m}{earlier})))"
    )


def build_arrival_dispersion(sel: str, rng: str) -> str:
    """How bursty the finished requests were over the window: half the mean squared change of
    their count between neighbouring BURST_BIN_SECONDS bins, the largest change left out, over
    the mean count (Allan's form of the index of dispersion: about 1 for Poisson arrivals,
    about 2 m - 1 for bursts of m on average). A load that steps up or down changes once, a
    burst twice (up, then down): without its largest change, a window with a step reads as
    steady, and one with bursts still as bursty; a steady trend adds only its change per bin
    squared over the count.

    A bin's count is each pod's counter now less 30 s ago (its newest sample then), never below
    0 (a restarted engine counts from 0 again), summed over the pods; a bin has no count where
    the series present differ between the two instants. Summed over the pods present at both
    instants, a bin in which a pod came (a scale-up, a rollout's new pod) or went (its scrape
    failed, it was replaced) counts only a part of what the fleet finished, a change down and
    up again that read as a burst: a rolled-out one-pod fleet of the control-loop bench read as
    bursts of 2 and halved its model capacity (docs/metrics.md).
    Not `increase(...[30s])`: with a sample every 15 s that sees 15 s of each 30 and doubles it,
    so half of the bursts would vanish and the other half count twice."""
    b, b2 = f"{BURST_BIN_SECONDS}s", f"{2 * BURST_BIN_SECONDS}s"
    m = f"vllm:request_success_total{sel}"
    now = _bin_count(m, "", f" offset {b}")
    before = _bin_count(m, f" offset {b}", f" offset {b2}")
    changes = f"(({now} - {before}) ^ 2)[{rng}:{b}]"
    return (
        f"(sum_over_time({changes}) - max_over_time({changes}))"
        f" / (count_over_time({changes}) - 1)"
        f" / (2 * avg_over_time({now}[{rng}:{b}]))"
    )


def build_pod_up(sel: str) -> str:
    """Per pod: 1 when the last scrape succeeded, 0 when it failed."""
    return f"max by (pod) (up{sel})"


def build_pod_sample_age(sel: str) -> str:
    """Per pod: seconds between the evaluation time and the pod's newest engine sample."""
    return f"time() - max by (pod) (timestamp(vllm:num_requests_running{sel}))"


def build_snapshot_queries(
    namespace: str, name: str, window_seconds: float, group: PodGroup = "all"
) -> dict[Figure, str]:
    """Every query a snapshot of a pod group needs, keyed by figure, in the order asked."""
    sel, rng = build_selector(namespace, name, group), build_range(window_seconds)
    queries: dict[Figure, str] = {
        "pod_up": build_pod_up(sel),
        "pod_sample_age": build_pod_sample_age(sel),
        "admitted_rate": build_admitted_rate(sel, rng),
        "rejection_rate_by_reason": build_rejection_rate_by_reason(sel, rng),
    }
    for figure, histogram in HISTOGRAMS.items():
        queries[figure] = build_quantile(histogram, sel, rng)
    queries.update(
        {
            "waiting": build_fleet_mean("vllm:num_requests_waiting", sel, rng),
            "running": build_fleet_mean("vllm:num_requests_running", sel, rng),
            "kv_usage": build_kv_usage(sel, rng),
            "preemption_rate": build_counter_rate("vllm:num_preemptions_total", sel, rng),
            "prompt_tokens_per_request": build_prompt_tokens_per_request(sel, rng),
            "pod_running": build_pod_mean("vllm:num_requests_running", sel, rng),
            "pod_waiting": build_pod_mean("vllm:num_requests_waiting", sel, rng),
            "pod_kv_usage": build_pod_mean("vllm:kv_cache_usage_perc", sel, rng, agg="max"),
            "lengths": build_lengths(sel, rng),
        }
    )
    if window_seconds >= MIN_BURST_BINS * BURST_BIN_SECONDS:
        queries["arrival_dispersion"] = build_arrival_dispersion(sel, rng)
    return queries
