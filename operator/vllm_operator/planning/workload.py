"""What a plan is for: the workload, as requests the engine model replays, and its statistics.

Open loop (a trace, Poisson arrivals, or a rate and lengths read from Prometheus) or closed loop
(`--concurrency N`, as `vllm bench serve --max-concurrency N`). A long open-loop workload is
searched on its busiest slice (`busiest_slice`), with a warm-up before it whose requests load the
engine but are not counted, and the recommendation is then checked on the whole of it.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import Literal

from vllm_operator.planning.lengths import Lengths
from vllm_operator.sim import workload as wl
from vllm_operator.sim.engine import SimRequest

SLICE_SECONDS = 300.0  # the search's window of a longer workload
# How long one burst of a bursty Poisson workload takes to arrive: its requests are uniform over
# it. A count per 30 s (what Prometheus can give) shows how big bursts are, not how long; on the
# code trace's bursts (67 requests in a second at most), bursts of the size its counts give,
# spread over 3 s, replay the trace's share of requests in the SLO to 4.5 points on average over
# 3, 5 and 8 pods by three token budgets (13.5 at most), where 1 s misses it by 27.0 and 5 s by
# 12.0 (bench/results/arrival_burstiness.md).
BURST_SECONDS = 3.0
WARMUP_SECONDS = 30.0  # arrivals before the window that fill the engine and are not counted
CLOSED_ROUNDS = 4  # a closed loop sends this many times its concurrency, after as many warm-up

Kind = Literal["trace", "poisson", "closed"]


@dataclass(frozen=True)
class Workload:
    kind: Kind
    label: str
    trace: str | None = None  # conv | code | a CSV path
    rate_multiplier: float = 1.0
    rate: float | None = None  # Poisson arrivals, req/s
    concurrency: int | None = None  # closed loop
    prompt: Lengths | None = None  # replaces the trace's lengths when given
    output: Lengths | None = None
    seed: int = 0
    horizon: float = SLICE_SECONDS  # the window searched: a Poisson run's length, a trace's slice
    # Poisson arrivals in bursts of this many requests on average (geometric sizes, each burst
    # over BURST_SECONDS): a compound Poisson process whose counts vary 2 burst - 1 times as much
    # as Poisson counts (tuning/observed_workload.py reads it from the window); 1 is plain Poisson
    burst: float = 1.0

    def __post_init__(self) -> None:
        if self.kind == "trace" and self.trace is None:
            raise ValueError("a trace workload needs a trace")
        if self.kind == "poisson" and (self.rate is None or self.rate <= 0):
            raise ValueError("a Poisson workload needs a rate > 0")
        if self.kind == "closed" and (self.concurrency is None or self.concurrency < 1):
            raise ValueError("a closed-loop workload needs a concurrency >= 1")
        if self.kind != "trace" and (self.prompt is None or self.output is None):
            raise ValueError(f"a {self.kind} workload needs prompt and output lengths")
        if not (math.isfinite(self.burst) and self.burst >= 1):
            raise ValueError(f"a workload's burst must be a number >= 1, got {self.burst!r}")


@dataclass(frozen=True)
class Arrivals:
    """Open-loop requests sorted by arrival; those before `count_from` are warm-up."""

    requests: tuple[SimRequest, ...]
    until: float  # last arrival time the runner accepts
    count_from: float = 0.0

    @property
    def counted(self) -> int:
        return sum(1 for r in self.requests if r.arrival >= self.count_from)


@dataclass(frozen=True)
class Stats:
    """What the layer-derived starting point reads (counted requests only)."""

    rate: float  # req/s
    prompt_mean: float
    prompt_p90: int
    prompt_max: int
    output_mean: float
    total_max: int  # prompt + output, the context a request needs


def build_arrivals(w: Workload) -> Arrivals:
    """Every request of an open-loop workload, deterministic for its seed."""
    if w.kind == "closed":
        raise ValueError("a closed-loop workload has no arrival schedule")
    if w.kind == "poisson":
        assert w.rate is not None and w.prompt is not None and w.output is not None
        end = w.horizon + WARMUP_SECONDS  # Poisson is stationary: one window will do
        out = _poisson(w.rate, w.burst, end, w.prompt, w.output, random.Random(w.seed))
        return Arrivals(tuple(out), end, count_from=WARMUP_SECONDS)
    assert w.trace is not None
    reqs = wl.azure_trace(w.trace, rate_multiplier=w.rate_multiplier)
    if w.prompt is not None or w.output is not None:
        rng = random.Random(w.seed)
        reqs = [
            replace(
                r,
                prompt_tokens=w.prompt.sample(rng) if w.prompt else r.prompt_tokens,
                max_tokens=w.output.sample(rng) if w.output else r.max_tokens,
            )
            for r in reqs
        ]
    return Arrivals(tuple(reqs), reqs[-1].arrival if reqs else 0.0)


def _poisson(
    rate: float, burst: float, end: float, prompt: Lengths, output: Lengths, rng: random.Random
) -> list[SimRequest]:
    """Arrivals at `rate` until `end`; with `burst` > 1, bursts of geometric size (mean `burst`)
    at Poisson times (rate / burst), each burst's requests uniform over BURST_SECONDS."""
    if burst == 1:  # the draws of plain Poisson arrivals, as before bursts were modelled
        out: list[SimRequest] = []
        t = 0.0
        while (t := t + rng.expovariate(rate)) < end:
            out.append(SimRequest(f"plan-{len(out)}", t, prompt.sample(rng), output.sample(rng)))
        return out
    return [
        SimRequest(f"plan-{k}", at, prompt.sample(rng), output.sample(rng))
        for k, at in enumerate(burst_times(rate, burst, end, rng))
    ]


def burst_times(
    rate: float, burst: float, end: float, rng: random.Random, spread: float = BURST_SECONDS
) -> list[float]:
    """Sorted arrival times before `end` at `rate`: bursts of geometric size (mean `burst`) at
    Poisson times (rate / burst), each burst's requests uniform over `spread` seconds."""
    times: list[float] = []
    t = 0.0
    while (t := t + rng.expovariate(rate / burst)) < end:
        size = 1
        while rng.random() >= 1 / burst:
            size += 1
        times += [t + rng.random() * spread for _ in range(size)]
    return sorted(at for at in times if at < end)


def busiest_slice(
    arrivals: Arrivals, seconds: float = SLICE_SECONDS, warmup: float = WARMUP_SECONDS
) -> Arrivals:
    """The `seconds` window with the most tokens (prompt + output), with `warmup` before it.

    Returns `arrivals` itself when it is no longer than the window plus the warm-up. Times are
    shifted so the warm-up starts at 0.
    """
    reqs = arrivals.requests
    if not reqs or arrivals.until <= seconds + warmup:
        return arrivals
    weights = [r.prompt_tokens + r.max_tokens for r in reqs]
    best, best_start, total, lo = -1, 0, 0, 0
    for hi, req in enumerate(reqs):
        total += weights[hi]
        while reqs[lo].arrival <= req.arrival - seconds:  # [start, start + seconds)
            total -= weights[lo]
            lo += 1
        if total > best and reqs[lo].arrival >= warmup:
            best, best_start = total, lo
    start = reqs[best_start].arrival
    t0 = start - warmup
    picked = [replace(r, arrival=r.arrival - t0) for r in reqs if t0 <= r.arrival < start + seconds]
    return Arrivals(tuple(picked), seconds + warmup, count_from=warmup)


def thin(arrivals: Arrivals, replicas: int, offset: int) -> Arrivals:
    """Every `replicas`-th request from `offset`: what one replica of a round-robin fleet gets."""
    return replace(arrivals, requests=arrivals.requests[offset::replicas])


def _p(values: list[int], q: float) -> int:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


def compute_stats(arrivals: Arrivals) -> Stats:
    counted = [r for r in arrivals.requests if r.arrival >= arrivals.count_from]
    if not counted:
        raise ValueError("the workload has no requests")
    span = max(arrivals.until - arrivals.count_from, 1e-9)
    prompts = [r.prompt_tokens for r in counted]
    return Stats(
        rate=len(counted) / span,
        prompt_mean=sum(prompts) / len(prompts),
        prompt_p90=_p(prompts, 0.9),
        prompt_max=max(prompts),
        output_mean=sum(r.max_tokens for r in counted) / len(counted),
        total_max=max(r.prompt_tokens + r.max_tokens for r in counted),
    )


def closed_stats(w: Workload, samples: int = 2000) -> Stats:
    """A closed loop's lengths, sampled as its jobs will be; its `rate` is not known (0)."""
    assert w.prompt is not None and w.output is not None
    rng = random.Random(w.seed)
    prompts = [w.prompt.sample(rng) for _ in range(samples)]
    outputs = [w.output.sample(rng) for _ in range(samples)]
    return Stats(
        rate=0.0,
        prompt_mean=sum(prompts) / samples,
        prompt_p90=_p(prompts, 0.9),
        prompt_max=max(prompts),
        output_mean=sum(outputs) / samples,
        total_max=max(p + o for p, o in zip(prompts, outputs, strict=True)),
    )
