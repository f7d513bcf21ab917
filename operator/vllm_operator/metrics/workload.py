"""What a VLLMService's clients sent over a window, for `vllm-operator plan --from-prometheus`.

The arrival rate counts every request the servers answered or refused with 503 (finished plus
admission rejections); the length distributions are vLLM's own histograms of finished requests,
`vllm:request_prompt_tokens` and `vllm:request_generation_tokens`, as the increase of each
bucket, and of each histogram's `_sum` (its exact mean, planning/lengths.py), over the window
summed over pods. The PromQL is built here (pure); `query_workload` is
the I/O, through the same client as the tuner's snapshot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from vllm_operator.metrics.prometheus import PrometheusClientLike
from vllm_operator.metrics.queries import (
    OUTPUT_HISTOGRAM,
    PROMPT_HISTOGRAM,
    build_range,
    build_selector,
)
from vllm_operator.metrics.vectors import le_buckets, parse_vector


class WorkloadQueryError(ValueError):
    """The workload cannot be read: Prometheus failed or holds no traffic for the service."""


@dataclass(frozen=True)
class ObservedWorkload:
    rate: float  # requests/s offered (finished + 503s)
    prompt_buckets: tuple[tuple[float, float], ...]  # (le, cumulative count over the window)
    output_buckets: tuple[tuple[float, float], ...]
    window_seconds: float
    prompt_sum: float | None = None  # the histograms' _sum increase; None: not answered
    output_sum: float | None = None


def build_workload_queries(namespace: str, name: str, window_seconds: float) -> dict[str, str]:
    sel, rng = build_selector(namespace, name), build_range(window_seconds)
    return {
        "rate": (
            f"sum(rate(vllm:request_success_total{sel}[{rng}]))"
            f" + (sum(rate(vllm:admission_rejections_total{sel}[{rng}])) or vector(0))"
        ),
        "prompt": f"sum by (le) (increase({PROMPT_HISTOGRAM}_bucket{sel}[{rng}]))",
        "output": f"sum by (le) (increase({OUTPUT_HISTOGRAM}_bucket{sel}[{rng}]))",
        "prompt_sum": f"sum(increase({PROMPT_HISTOGRAM}_sum{sel}[{rng}]))",
        "output_sum": f"sum(increase({OUTPUT_HISTOGRAM}_sum{sel}[{rng}]))",
    }


def query_workload(
    prom: PrometheusClientLike, namespace: str, name: str, *, window: float, now: datetime
) -> ObservedWorkload:
    """The workload of `namespace/name` over `window` seconds to `now`; WorkloadQueryError."""
    queries = build_workload_queries(namespace, name, window)
    answers = {}
    for key, query in queries.items():
        try:
            answers[key] = prom.custom_query(query, params={"time": now.timestamp()})
        except Exception as exc:  # any client failure is one line for the user
            where = getattr(prom, "url", "Prometheus")
            detail = " ".join(str(exc).split())[:200]
            raise WorkloadQueryError(f"{where}: the query for {key} failed: {detail}") from None
    rates = parse_vector(answers["rate"])
    rate = rates[0].value if rates else 0.0
    if not rate > 0 or not math.isfinite(rate):
        raise WorkloadQueryError(
            f"no requests to {namespace}/{name} in the last {window:g}s: nothing to plan for"
        )
    prompt = le_buckets(parse_vector(answers["prompt"]))
    output = le_buckets(parse_vector(answers["output"]))
    if not prompt or not output:
        raise WorkloadQueryError(
            f"{namespace}/{name} has no {PROMPT_HISTOGRAM} / {OUTPUT_HISTOGRAM} buckets in the"
            " window (is /metrics scraped with its histograms?)"
        )
    sums = [parse_vector(answers[k]) for k in ("prompt_sum", "output_sum")]
    prompt_sum, output_sum = (v[0].value if len(v) == 1 else None for v in sums)
    return ObservedWorkload(rate, prompt, output, window, prompt_sum, output_sum)
