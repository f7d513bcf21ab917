"""Client-side figures of a load run: latency percentiles, 503 share, throughput, goodput.

The figures are the ones the virtual-time runner reports, measured here from the client side:
- TTFT and ITL exist only for streamed requests (chunk arrival times);
- TPOT = (E2E - TTFT) / (output tokens - 1), the per-request mean gap, as vLLM defines it;
- latencies run from the request's first attempt, so 503 retries and backoff are included;
- goodput counts successful requests whose TTFT and TPOT are within the SLO.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Outcome:
    """What happened to one scheduled request, its retries included."""

    start: float  # seconds since the run started, when the first attempt was sent
    end: float  # when the last attempt ended
    status: int | None  # final HTTP status; None when no answer came (connection error, timeout)
    attempts: int
    rejections: int  # attempts answered 503
    prompt_tokens: int
    output_tokens: int
    ttft: float | None = None
    itls: tuple[float, ...] = ()
    error: str | None = None
    finish_reason: str | None = None

    @property
    def ok(self) -> bool:
        """Answered in full: a 200 that vLLM did not end with finish_reason "abort"."""
        return self.status == 200 and self.finish_reason != "abort"

    @property
    def e2e(self) -> float:
        return self.end - self.start

    @property
    def tpot(self) -> float | None:
        if self.ttft is None or not self.ok:
            return None
        if self.output_tokens <= 1:
            return 0.0  # vLLM observes 0 for single-token requests
        return (self.e2e - self.ttft) / (self.output_tokens - 1)


@dataclass(frozen=True)
class Slo:
    ttft: float  # seconds
    tpot: float  # seconds per output token after the first


@dataclass(frozen=True)
class Distribution:
    count: int
    mean: float | None
    p50: float | None
    p95: float | None
    p99: float | None


@dataclass(frozen=True)
class Report:
    requests: int
    succeeded: int
    rejected: int  # final answer 503 (after any retries)
    errors: int  # other statuses or no answer
    attempts: int
    responses_503: int
    retries: int
    rejection_share: float  # 503 answers / attempts: what the server's 503 counter sees
    failed_share: float  # requests that did not succeed / requests: what users see
    span_s: float
    throughput_rps: float
    output_tokens_per_s: float
    goodput_rps: float | None  # None without TTFT data (non-streamed runs)
    slo: Slo
    ttft: Distribution
    itl: Distribution
    tpot: Distribution
    e2e: Distribution


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); q in [0, 100]."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside [0, 100]")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def distribution(values: Sequence[float]) -> Distribution:
    if not values:
        return Distribution(0, None, None, None, None)
    return Distribution(
        count=len(values),
        mean=sum(values) / len(values),
        p50=percentile(values, 50),
        p95=percentile(values, 95),
        p99=percentile(values, 99),
    )


def _meets(o: Outcome, slo: Slo) -> bool:
    tpot = o.tpot
    return (
        o.ok
        and o.ttft is not None
        and o.ttft <= slo.ttft
        and tpot is not None
        and (tpot <= slo.tpot)
    )


def summarize_outcomes(outcomes: Sequence[Outcome], slo: Slo) -> Report:
    ok = [o for o in outcomes if o.ok]
    attempts = sum(o.attempts for o in outcomes)
    responses_503 = sum(o.rejections for o in outcomes)
    span = max((o.end for o in outcomes), default=0.0) - min(
        (o.start for o in outcomes), default=0.0
    )
    streamed = [o for o in ok if o.ttft is not None]

    def per_s(n: float) -> float:
        return n / span if span > 0 else 0.0

    return Report(
        requests=len(outcomes),
        succeeded=len(ok),
        rejected=sum(1 for o in outcomes if o.status == 503),
        errors=sum(1 for o in outcomes if not o.ok and o.status != 503),
        attempts=attempts,
        responses_503=responses_503,
        retries=attempts - len(outcomes),
        rejection_share=responses_503 / attempts if attempts else 0.0,
        failed_share=(len(outcomes) - len(ok)) / len(outcomes) if outcomes else 0.0,
        span_s=span,
        throughput_rps=per_s(len(ok)),
        output_tokens_per_s=per_s(sum(o.output_tokens for o in ok)),
        goodput_rps=per_s(sum(1 for o in ok if _meets(o, slo))) if streamed else None,
        slo=slo,
        ttft=distribution([o.ttft for o in streamed if o.ttft is not None]),
        itl=distribution([gap for o in ok for gap in o.itls]),
        tpot=distribution([t for o in streamed if (t := o.tpot) is not None]),
        e2e=distribution([o.e2e for o in ok]),
    )


def report_to_dict(report: Report) -> dict[str, Any]:
    return asdict(report)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def render_table(report: Report) -> str:
    r = report
    goodput = "-" if r.goodput_rps is None else f"{r.goodput_rps:.2f}"
    lines = [
        f"requests {r.requests}  succeeded {r.succeeded}  rejected(503) {r.rejected}  "
        f"errors {r.errors}",
        f"attempts {r.attempts}  503 answers {r.responses_503}  retries {r.retries}  "
        f"503 share {r.rejection_share:.2%}  failed share {r.failed_share:.2%}",
        f"span {r.span_s:.1f}s  throughput {r.throughput_rps:.2f} req/s  "
        f"{r.output_tokens_per_s:.1f} tok/s  goodput {goodput} req/s "
        f"(SLO ttft<={r.slo.ttft * 1000:.0f}ms tpot<={r.slo.tpot * 1000:.0f}ms)",
        f"{'metric':<6} {'count':>7} {'mean ms':>10} {'p50 ms':>10} {'p95 ms':>10} {'p99 ms':>10}",
    ]
    for name, d in (("ttft", r.ttft), ("itl", r.itl), ("tpot", r.tpot), ("e2e", r.e2e)):
        lines.append(
            f"{name:<6} {d.count:>7} {_ms(d.mean):>10} {_ms(d.p50):>10} {_ms(d.p95):>10} "
            f"{_ms(d.p99):>10}"
        )
    return "\n".join(lines)
