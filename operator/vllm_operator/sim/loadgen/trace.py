"""Workloads for the load generator: Azure LLM trace replay or a Poisson stream.

A minimal reader of the Azure LLM inference trace 2023 (`TIMESTAMP,ContextTokens,GeneratedTokens`,
CC-BY 4.0, Patel et al., ISCA 2024). If the virtual-time runner grows its own trace loader the
two should be unified; this one is kept small on purpose.
"""

from __future__ import annotations

import csv
import os
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

TRACE_NAMES = {"conv": "azure-llm-2023-conv.csv", "code": "azure-llm-2023-code.csv"}
# where `--trace conv|code` is looked up, first hit wins
TRACES_DIR_ENV = "VLLM_OPERATOR_TRACES_DIR"


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


def _timestamp(text: str) -> float:
    # "2023-11-16 18:17:03.9799600": seven fractional digits, more than datetime parses
    day_time, _, frac = text.strip().partition(".")
    base = datetime.strptime(day_time, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()
    return base + (float("0." + frac) if frac else 0.0)


def resolve_trace(name_or_path: str, search: Sequence[Path] = ()) -> Path:
    """`conv`/`code` → the Azure file in $VLLM_OPERATOR_TRACES_DIR or `search`; else a path."""
    if name_or_path not in TRACE_NAMES:
        path = Path(name_or_path)
        if not path.is_file():
            raise ValueError(f"trace file {name_or_path!r} does not exist")
        return path
    dirs = list(search)
    if env_dir := os.environ.get(TRACES_DIR_ENV):
        dirs.insert(0, Path(env_dir))
    for d in dirs:
        candidate = d / TRACE_NAMES[name_or_path]
        if candidate.is_file():
            return candidate
    looked = ", ".join(str(d) for d in dirs) or "nowhere"
    raise ValueError(
        f"trace {name_or_path!r}: {TRACE_NAMES[name_or_path]} not found (looked in {looked}); "
        f"set {TRACES_DIR_ENV} or pass a file path"
    )


def read_trace(path: Path) -> list[TraceRow]:
    """Rows sorted by time; lengths are clamped to at least one token."""
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: missing columns {sorted(missing)}")
        raw = [
            (_timestamp(r["TIMESTAMP"]), int(r["ContextTokens"]), int(r["GeneratedTokens"]))
            for r in reader
        ]
    if not raw:
        raise ValueError(f"{path}: no rows")
    raw.sort(key=lambda r: r[0])
    t0 = raw[0][0]
    return [TraceRow(t - t0, max(1, p), max(1, g)) for t, p, g in raw]


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
