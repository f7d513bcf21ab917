"""Workloads for the virtual-time runner: trace replay and synthetic arrival processes.

Every generator returns a list of `SimRequest` sorted by arrival, deterministic for a seed.
- `azure_trace`: the Azure LLM inference trace 2023 (CC-BY 4.0, see traces/README.md), arrival
  gaps divided by a rate multiplier, token counts as recorded;
- `poisson`: a constant rate; `bursty`: on/off rates; `ramp`: a linear rate change;
  `diurnal`: a sine around a mean. The non-constant ones are inhomogeneous Poisson processes,
  sampled by thinning.
"""

from __future__ import annotations

import functools
import math
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from vllm_operator.sim.engine.request import SimRequest

TRACES = {"conv": "azure-llm-2023-conv.csv", "code": "azure-llm-2023-code.csv"}
# a directory searched for `conv`/`code` before the packaged copies
TRACES_DIR_ENV = "VLLM_OPERATOR_TRACES_DIR"


@dataclass(frozen=True)
class LengthDist:
    """Token-count distribution: fixed, exponential, lognormal or uniform; clamped to [1, cap]."""

    kind: str = "fixed"  # fixed | exponential | lognormal | uniform
    mean: float = 256.0  # fixed value, mean (exponential, lognormal) or low bound (uniform)
    spread: float = 1.0  # lognormal sigma, or the uniform high bound
    cap: int = 1_000_000

    def __post_init__(self) -> None:
        if self.kind not in ("fixed", "exponential", "lognormal", "uniform"):
            raise ValueError(f"unknown length distribution {self.kind!r}")
        if self.mean <= 0 or self.spread <= 0 or self.cap < 1:
            raise ValueError("length distribution parameters must be positive")

    def sample(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            value = self.mean
        elif self.kind == "exponential":
            value = rng.expovariate(1.0 / self.mean)
        elif self.kind == "lognormal":
            # mu chosen so that the mean of the distribution is `mean`
            value = rng.lognormvariate(math.log(self.mean) - self.spread**2 / 2, self.spread)
        else:
            value = rng.uniform(self.mean, self.spread)
        return max(1, min(self.cap, round(value)))


def resolve_trace(name: str | Path) -> Path:
    """`conv`/`code` -> the Azure file ($VLLM_OPERATOR_TRACES_DIR first, then the packaged copy);
    anything else is a path. ValueError names what is missing."""
    if isinstance(name, str) and name in TRACES:
        if env_dir := os.environ.get(TRACES_DIR_ENV):
            candidate = Path(env_dir) / TRACES[name]
            if not candidate.is_file():
                raise ValueError(
                    f"trace {name!r}: {TRACES[name]} not found in {TRACES_DIR_ENV}={env_dir}; "
                    "unset it for the packaged trace or pass a file path"
                )
            return candidate
        return Path(str(resources.files("vllm_operator.sim").joinpath("traces", TRACES[name])))
    path = Path(name)
    if not path.is_file():
        raise ValueError(f"trace file {str(name)!r} does not exist")
    return path


def _seconds(stamp: str) -> float:
    # "2023-11-16 18:17:03.9799600": seven fractional digits, more than fromisoformat takes
    day, _, clock = stamp.strip().partition(" ")
    whole, _, frac = clock.partition(".")
    base = datetime.fromisoformat(f"{day} {whole}").replace(tzinfo=UTC).timestamp()
    return base + (float(f"0.{frac}") if frac else 0.0)


def read_trace(name: str | Path) -> list[tuple[float, int, int]]:
    """(seconds since the first request, context tokens, generated tokens), in order."""
    return list(_read_trace(resolve_trace(name)))


@functools.lru_cache(maxsize=8)
def _read_trace(path: Path) -> tuple[tuple[float, int, int], ...]:
    # parsed once per process: benchmarks replay the same file many times
    rows: list[tuple[float, int, int]] = []
    with path.open(encoding="utf-8") as f:
        header = f.readline().strip().split(",")
        if header[:3] != ["TIMESTAMP", "ContextTokens", "GeneratedTokens"]:
            raise ValueError(f"{path}: expected columns TIMESTAMP,ContextTokens,GeneratedTokens")
        for line in f:
            if line.strip():
                stamp, context, generated = line.strip().split(",")[:3]
                rows.append((_seconds(stamp), int(context), int(generated)))
    rows.sort(key=lambda row: row[0])
    t0 = rows[0][0] if rows else 0.0
    return tuple((t - t0, max(1, c), max(1, g)) for t, c, g in rows)


def azure_trace(
    name: str | Path = "conv",
    *,
    rate_multiplier: float = 1.0,
    start: float = 0.0,
    duration: float | None = None,
    loop: bool = False,
) -> list[SimRequest]:
    """Replay a trace from `start` (trace seconds) for `duration` virtual seconds.

    Gaps are divided by `rate_multiplier`. With `loop` the trace repeats until `duration`.
    """
    if rate_multiplier <= 0:
        raise ValueError(f"rate multiplier must be > 0, got {rate_multiplier}")
    rows = [row for row in read_trace(name) if row[0] >= start]
    if not rows:
        return []
    span = (rows[-1][0] - start) / rate_multiplier
    # the repeat period: the trace span plus one mean gap, so a loop does not stack requests
    period = span + span / max(len(rows) - 1, 1)
    out: list[SimRequest] = []
    lap = 0
    while True:
        for t, context, generated in rows:
            at = (t - start) / rate_multiplier + lap * period
            if duration is not None and at >= duration:
                return out
            out.append(SimRequest(f"trace-{len(out)}", at, context, generated))
        lap += 1
        if not loop or duration is None:
            return out


def step(
    base_rate: float,
    factor: float,
    at: float,
    rise: float,
    duration: float,
    prompt: LengthDist,
    output: LengthDist,
    seed: int = 0,
) -> list[SimRequest]:
    """`base_rate` until `at`, then linearly up to `factor` x it within `rise` s, and on."""
    if factor < 0 or rise < 0:
        raise ValueError("factor and rise must be >= 0")

    def rate(t: float) -> float:
        if t < at:
            return base_rate
        share = 1.0 if rise == 0 else min(1.0, (t - at) / rise)
        return base_rate * (1 + (factor - 1) * share)

    peak = base_rate * max(1.0, factor)
    return _thinning(rate, peak, duration, prompt, output, seed, "step")


def _thinning(
    rate: Callable[[float], float],
    peak: float,
    duration: float,
    prompt: LengthDist,
    output: LengthDist,
    seed: int,
    prefix: str,
) -> list[SimRequest]:
    if peak < 0 or duration < 0:
        raise ValueError("rates and durations must be >= 0")
    rng = random.Random(seed)
    out: list[SimRequest] = []
    t = 0.0
    while peak > 0:
        t += rng.expovariate(peak)
        if t >= duration:
            break
        if rng.random() * peak <= rate(t):
            out.append(
                SimRequest(f"{prefix}-{len(out)}", t, prompt.sample(rng), output.sample(rng))
            )
    return out


def poisson(
    rate: float, duration: float, prompt: LengthDist, output: LengthDist, seed: int = 0
) -> list[SimRequest]:
    return _thinning(lambda _t: rate, rate, duration, prompt, output, seed, "poisson")


def bursty(
    on_rate: float,
    off_rate: float,
    on_seconds: float,
    off_seconds: float,
    duration: float,
    prompt: LengthDist,
    output: LengthDist,
    seed: int = 0,
) -> list[SimRequest]:
    """`on_rate` for `on_seconds`, then `off_rate` for `off_seconds`, repeating."""
    period = on_seconds + off_seconds
    if on_seconds <= 0 or off_seconds < 0:
        raise ValueError("burst periods must be positive")

    def rate(t: float) -> float:
        return on_rate if t % period < on_seconds else off_rate

    return _thinning(rate, max(on_rate, off_rate), duration, prompt, output, seed, "bursty")


def ramp(
    start_rate: float,
    end_rate: float,
    duration: float,
    prompt: LengthDist,
    output: LengthDist,
    seed: int = 0,
) -> list[SimRequest]:
    """The rate moves linearly from `start_rate` to `end_rate` over `duration`."""

    def rate(t: float) -> float:
        return start_rate + (end_rate - start_rate) * t / duration if duration else start_rate

    return _thinning(rate, max(start_rate, end_rate), duration, prompt, output, seed, "ramp")


def diurnal(
    mean_rate: float,
    amplitude: float,
    period: float,
    duration: float,
    prompt: LengthDist,
    output: LengthDist,
    seed: int = 0,
) -> list[SimRequest]:
    """rate(t) = mean * (1 + amplitude * sin(2*pi*t/period)), amplitude in [0, 1]."""
    if not 0 <= amplitude <= 1 or period <= 0:
        raise ValueError("amplitude must be in [0, 1] and period > 0")

    def rate(t: float) -> float:
        return mean_rate * (1 + amplitude * math.sin(2 * math.pi * t / period))

    peak = mean_rate * (1 + amplitude)
    return _thinning(rate, peak, duration, prompt, output, seed, "diurnal")
