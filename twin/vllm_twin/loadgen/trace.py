"""Workloads for the load generator: Azure LLM trace replay or a Poisson stream.

The trace is read by the engine model's own reader (`vllm_operator.sim.workload`), so the load
generator and the virtual-time runner replay the same rows from the same file.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from vllm_operator.sim import workload


@dataclass(frozen=True)
class TraceRow:
    offset: float  # seconds since the first row of the trace
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Arrival:
    offset: float  # seconds after the start of the run, in the target's time
    prompt_tokens: int
    max_tokens: int


def resolve_trace(name_or_path: str) -> Path:
    """`conv`/`code` -> the Azure file ($VLLM_OPERATOR_TRACES_DIR, else packaged); else a path."""
    return workload.resolve_trace(name_or_path)


def read_trace(path: Path) -> list[TraceRow]:
    """Rows sorted by time; lengths are clamped to at least one token."""
    rows = workload.read_trace(path)
    if not rows:
        raise ValueError(f"{path}: no rows")
    return [TraceRow(t, p, g) for t, p, g in rows]


def replay(rows: Sequence[TraceRow], rate_multiplier: float) -> Iterator[Arrival]:
    """The trace's own arrival times, compressed by `rate_multiplier` (2 = twice the rate)."""
    if rate_multiplier <= 0:
        raise ValueError("rate multiplier must be > 0")
    for r in rows:
        yield Arrival(r.offset / rate_multiplier, r.prompt_tokens, r.output_tokens)


def poisson(
    rate: float, lengths: Sequence[tuple[int, int]], rng: random.Random
) -> Iterator[Arrival]:
    """Endless Poisson arrivals at `rate`/s; lengths cycle through `lengths` (prompt, output)."""
    if rate <= 0:
        raise ValueError("rate must be > 0")
    if not lengths:
        raise ValueError("need at least one (prompt, output) length pair")
    t = 0.0
    i = 0
    while True:
        t += rng.expovariate(rate)
        prompt, output = lengths[i % len(lengths)]
        i += 1
        yield Arrival(t, prompt, output)


def bounded(
    arrivals: Iterator[Arrival], duration: float, max_requests: int | None
) -> list[Arrival]:
    """The arrivals before `duration`, at most `max_requests` of them: the run's whole schedule."""
    out: list[Arrival] = []
    for a in arrivals:
        if a.offset >= duration or (max_requests is not None and len(out) >= max_requests):
            break
        out.append(a)
    return out
