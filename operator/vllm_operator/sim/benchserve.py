"""The figures `vllm bench serve` prints, from per-request client samples.

Definitions follow vLLM's benchmark client (vllm/benchmarks/serve.py, `calculate_metrics`):
- duration: from the first counted request's send to the last counted request's end;
- request throughput = completed / duration; output token throughput = output tokens /
  duration; total token throughput = (input + output tokens of completed requests) / duration;
- TTFT per completed request; TPOT = (E2E latency - TTFT) / (output tokens - 1), only for
  requests with more than one output token; ITL over every inter-token gap of every completed
  request; E2EL = the request's latency;
- mean, median and p99 of each (percentiles interpolate linearly, numpy's default).
Warm-up requests (`counted=False`) are left out of everything.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from vllm_operator.sim.report import percentile


@dataclass(frozen=True)
class ClientSample:
    """One request as the benchmark client saw it; times in seconds since the run started."""

    start: float
    end: float
    prompt_tokens: int
    output_tokens: int
    ttft: float | None  # None when it failed or was not streamed
    itls: tuple[float, ...] = ()
    ok: bool = True
    counted: bool = True

    @classmethod
    def failed(cls, at: float, prompt_tokens: int, counted: bool = True) -> ClientSample:
        return cls(at, at, prompt_tokens, 0, None, (), ok=False, counted=counted)

    @property
    def e2el(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Stat:
    """A distribution in milliseconds, as the benchmark prints it; NaN when empty."""

    mean: float
    median: float
    p99: float

    @classmethod
    def of(cls, seconds: Iterable[float]) -> Stat:
        values = sorted(v * 1000 for v in seconds)
        if not values:
            return cls(math.nan, math.nan, math.nan)
        return cls(math.fsum(values) / len(values), percentile(values, 50), percentile(values, 99))


@dataclass(frozen=True)
class BenchServeFigures:
    completed: int
    failed: int
    duration_s: float
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float  # requests/s
    output_throughput: float  # output tokens/s
    total_token_throughput: float  # input + output tokens/s
    ttft_ms: Stat
    tpot_ms: Stat
    itl_ms: Stat
    e2el_ms: Stat

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def bench_serve_figures(samples: Sequence[ClientSample]) -> BenchServeFigures:
    counted = [s for s in samples if s.counted]
    ok = [s for s in counted if s.ok]
    duration = max(s.end for s in counted) - min(s.start for s in counted) if counted else math.nan
    span = duration if duration > 0 else math.nan
    total_in = sum(s.prompt_tokens for s in ok)
    total_out = sum(s.output_tokens for s in ok)
    timed = [s for s in ok if s.ttft is not None]
    return BenchServeFigures(
        completed=len(ok),
        failed=len(counted) - len(ok),
        duration_s=duration,
        total_input_tokens=total_in,
        total_output_tokens=total_out,
        request_throughput=len(ok) / span,
        output_throughput=total_out / span,
        total_token_throughput=(total_in + total_out) / span,
        ttft_ms=Stat.of(s.ttft for s in timed if s.ttft is not None),
        tpot_ms=Stat.of(
            (s.e2el - s.ttft) / (s.output_tokens - 1)
            for s in timed
            if s.ttft is not None and s.output_tokens > 1
        ),
        itl_ms=Stat.of(gap for s in timed for gap in s.itls),
        e2el_ms=Stat.of(s.e2el for s in ok),
    )


def format_bench_serve(f: BenchServeFigures) -> str:
    """The benchmark's result block, with its labels."""

    def num(value: float, digits: int = 2) -> str:
        return "-" if math.isnan(value) else f"{value:.{digits}f}"

    rows: list[tuple[str, str] | str] = [
        "{s:{c}^50}".format(s=" Serving Benchmark Result ", c="="),
        ("Successful requests:", str(f.completed)),
        ("Failed requests:", str(f.failed)),
        ("Benchmark duration (s):", num(f.duration_s)),
        ("Total input tokens:", str(f.total_input_tokens)),
        ("Total generated tokens:", str(f.total_output_tokens)),
        ("Request throughput (req/s):", num(f.request_throughput)),
        ("Output token throughput (tok/s):", num(f.output_throughput)),
        ("Total Token throughput (tok/s):", num(f.total_token_throughput)),
    ]
    for title, short, stat in (
        ("Time to First Token", "TTFT", f.ttft_ms),
        ("Time per Output Token (excl. 1st token)", "TPOT", f.tpot_ms),
        ("Inter-token Latency", "ITL", f.itl_ms),
        ("End-to-end Latency", "E2EL", f.e2el_ms),
    ):
        rows.append("{s:{c}^50}".format(s=f" {title} ", c="-"))
        rows += [
            (f"Mean {short} (ms):", num(stat.mean)),
            (f"Median {short} (ms):", num(stat.median)),
            (f"P99 {short} (ms):", num(stat.p99)),
        ]
    rows.append("=" * 50)
    return "\n".join(r if isinstance(r, str) else f"{r[0]:<40}{r[1]:<10}" for r in rows)
