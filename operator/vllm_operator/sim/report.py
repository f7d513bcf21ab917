"""Aggregate figures of a run: latency percentiles, 503s, throughput, goodput under an SLO.

Percentiles interpolate linearly between order statistics (numpy's default "linear" method):
p-th of sorted x[0..n-1] is at rank p/100*(n-1). Definitions:
- TTFT and E2E per completed request, client-visible (engine timestamp + API output delay);
- ITL over every inter-token gap of every completed request (what vLLM's histogram samples);
- rejected = requests refused with a 503 (vLLM's admission or no ready replica) or a 400;
  share = rejected / offered;
- throughput over the window [0, max(until, last finish)];
- goodput: completed requests whose TTFT <= slo.ttft and whose own ITL p95 <= slo.itl, per
  second of the same window; a request with a single output has no ITL and passes on TTFT.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from vllm_operator.sim.engine import RequestRecord


@dataclass(frozen=True)
class Slo:
    ttft: float  # seconds
    itl: float  # seconds, per-request ITL p95


@dataclass(frozen=True)
class Latency:
    p50: float
    p95: float
    p99: float
    mean: float
    count: int


@dataclass(frozen=True)
class Figures:
    offered: int
    completed: int
    rejected: int
    rejected_share: float
    rejected_by_reason: dict[str, int]
    unfinished: int
    window: float
    ttft: Latency
    itl: Latency
    e2e: Latency
    throughput_rps: float
    output_tps: float
    goodput_rps: float | None
    goodput_share: float | None
    kv_usage_mean: float
    kv_usage_max: float
    preemptions: int
    slo: Slo | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks; NaN for an empty sequence."""
    if not sorted_values:
        return math.nan
    rank = p / 100 * (len(sorted_values) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    frac = rank - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * frac


def latency(values: list[float], total: float | None = None) -> Latency:
    """Percentiles of `values` (sorted in place); `total` is their sum if already known."""
    values.sort()
    if total is None:
        total = math.fsum(values)
    mean = total / len(values) if values else math.nan
    return Latency(
        percentile(values, 50), percentile(values, 95), percentile(values, 99), mean, len(values)
    )


def meets_slo(record: RequestRecord, slo: Slo, gaps: list[float] | None = None) -> bool:
    """TTFT within the SLO and the request's own ITL p95 within it."""
    if record.ttft > slo.ttft:
        return False
    gaps = sorted(record.itls if gaps is None else gaps)
    return not gaps or percentile(gaps, 95) <= slo.itl


def compute_figures(
    completed: Sequence[RequestRecord],
    *,
    offered: int,
    rejected_reasons: Sequence[str],
    unfinished: int,
    window: float,
    slo: Slo | None,
    kv_usage_mean: float,
    kv_usage_max: float,
    preemptions: int,
) -> Figures:
    itls: list[float] = []
    good: int | None = 0 if slo is not None else None
    for record in completed:
        gaps = list(record.itls)
        itls.extend(gaps)
        if slo is not None and good is not None and meets_slo(record, slo, gaps):
            good += 1
    # the gaps of a request add up to its decode time, so the mean needs no second pass
    itl_total = math.fsum(r.decode_time for r in completed)
    span = window if window > 0 else math.nan
    return Figures(
        offered=offered,
        completed=len(completed),
        rejected=len(rejected_reasons),
        rejected_share=len(rejected_reasons) / offered if offered else 0.0,
        rejected_by_reason=dict(sorted(Counter(rejected_reasons).items())),
        unfinished=unfinished,
        window=window,
        ttft=latency([r.ttft for r in completed]),
        itl=latency(itls, itl_total),
        e2e=latency([r.e2e for r in completed]),
        throughput_rps=len(completed) / span,
        output_tps=sum(r.output_tokens for r in completed) / span,
        goodput_rps=good / span if good is not None else None,
        goodput_share=good / offered if good is not None and offered else None,
        kv_usage_mean=kv_usage_mean,
        kv_usage_max=kv_usage_max,
        preemptions=preemptions,
        slo=slo,
    )


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value * 1000:.1f} ms"


def _rate(value: float, digits: int) -> str:
    # NaN when the window is empty (nothing arrived before the run ended): no rate to show
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def format_table(figures: Figures) -> str:
    """Human-readable summary, one figure per line."""
    f = figures
    rows = [
        ("requests offered", str(f.offered)),
        ("completed", str(f.completed)),
        ("rejected (503/400)", f"{f.rejected} ({f.rejected_share:.1%})"),
    ]
    rows += [(f"  {reason}", str(count)) for reason, count in f.rejected_by_reason.items()]
    rows.append(("unfinished", str(f.unfinished)))
    for name, lat in (("TTFT", f.ttft), ("ITL", f.itl), ("E2E", f.e2e)):
        rows.append((f"{name} p50/p95/p99", f"{_ms(lat.p50)} / {_ms(lat.p95)} / {_ms(lat.p99)}"))
    throughput = f"{_rate(f.throughput_rps, 2)} req/s, {_rate(f.output_tps, 0)} output tok/s"
    rows += [
        ("throughput", throughput),
        ("window", f"{f.window:.1f} s"),
    ]
    if f.slo is not None and f.goodput_rps is not None:
        slo = f"TTFT <= {_ms(f.slo.ttft)}, ITL p95 <= {_ms(f.slo.itl)}"
        share = f.goodput_share if f.goodput_share is not None else 0.0
        goodput = f"{_rate(f.goodput_rps, 2)} req/s ({share:.1%} of offered)"
        rows.append((f"goodput ({slo})", goodput))
    rows += [
        ("KV usage mean/max", f"{f.kv_usage_mean:.1%} / {f.kv_usage_max:.1%}"),
        ("preemptions", str(f.preemptions)),
    ]
    rows += [(key, str(value)) for key, value in f.extra.items()]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in rows)
