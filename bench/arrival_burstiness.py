"""How bursty the control-loop bench's traces arrive, and what the engine model misses when it
replays a window as Poisson arrivals (docs/benchmarks.md, "Bursts the model does not replay").

    python -m bench.arrival_burstiness [--start 300] [--seconds 600] [--pods 3,5,8]
                                       [--tokens 8192,1024,512] [--jobs 2] [--out DIR]

The operator's engine model (tuning/observed_workload.py) replays what a window showed as Poisson
arrivals at the window's rate with its prompt and output lengths. Three parts:

- **dispersion**: for each trace at the rate the bench's scenarios use (bench/control_loop/
  scenarios.py), how bursty its arrivals are in 30-second bins, per five-minute window of the
  trace's first hour, as the operator reads it (docs/metrics.md, `arrival_dispersion`: half the
  mean squared change between neighbouring bins, the largest left out, over the mean count; a
  Poisson process gives about 1), and the most arrivals in one second;
- **replays**: one slice of the code trace (--start, --seconds, at the H100 scenario's rate and
  SLO: Llama-3.1-8B, TTFT p95 0.5 s, ITL p95 30 ms) on the H100 service's budgets, for each pod
  count and `maxBatchedTokens`: the share of requests in the SLO, TTFT p95 and ITL p95, with
  the trace's own arrival times, with the same requests at Poisson times of the same rate (what
  the model replays now), and with the same requests in bursts as big as the slice's dispersion
  says (compound Poisson, geometric burst sizes of mean (dispersion + 1) / 2, the mean of
  BURST_SEEDS draws) spread over 1 s, 3 s (what the model replays, planning/workload.py
  BURST_SECONDS) and 5 s: how a burst is spread inside a bin no 30-second count shows.

Figures go to DIR/arrival_burstiness.{md,json,png} (default bench/results/). Nothing passes or
fails.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.control_loop.scenarios import H100
from bench.flags import at_least_one_job, run_all, whole_numbers

from vllm_operator.planning.candidate import Candidate, Target
from vllm_operator.planning.evaluate import Setting, evaluate
from vllm_operator.planning.workload import (
    BURST_SECONDS,
    WARMUP_SECONDS,
    Arrivals,
    Workload,
    burst_times,
)
from vllm_operator.sim.catalog import load_catalog
from vllm_operator.sim.workload import azure_trace
from vllm_twin.observe import dispersion_of

RESULTS = Path(__file__).resolve().parent / "results"
BIN_SECONDS = 30.0  # two scrapes at the default 15 s interval: the shortest rate Prometheus gives
WINDOW_SECONDS = 300.0  # the operator's default metricsWindow
HOUR = 3600.0
# (trace, rate multiplier, the scenarios that replay it at that rate)
TRACES = (
    ("conv", 0.5, "l4-3b/conv"),
    ("conv", 1.25, "h100-8b/conv"),
    ("code", 1.0, "h100-8b/code, the second half of h100-8b/shift"),
)
MAX_QUEUED = H100.max_requests
MAX_SEQS = H100.max_seqs
ARRIVALS = ("trace", "poisson", "bursts 1s", "bursts 3s", "bursts 5s")
BURST_SEEDS = 3


@dataclass(frozen=True)
class Dispersion:
    trace: str
    rate_multiplier: float
    scenarios: str
    rate: float  # req/s over the hour
    median: float  # of the windows' dispersion
    p90: float
    highest: float
    most_in_a_second: int


@dataclass(frozen=True)
class Replay:
    arrivals: str  # one of ARRIVALS
    pods: int
    max_batched_tokens: int
    slo_share: float
    ttft_p95: float
    itl_p95: float


def dispersion(times: Sequence[float], start: float, seconds: float) -> float:
    """The arrivals' dispersion in consecutive BIN_SECONDS bins of [start, start + seconds),
    as the operator reads it from the finished requests (twin/vllm_twin/observe.py
    dispersion_of: the squared changes between neighbouring counts, the largest left out, over
    twice the mean count); NaN when no arrival falls there. About 1 for Poisson arrivals."""
    bins = int(seconds // BIN_SECONDS)
    if bins < 3:
        raise ValueError(f"{seconds} s holds fewer than three {BIN_SECONDS:.0f}-second bins")
    counts = [0] * bins
    for t in times:
        k = math.floor((t - start) / BIN_SECONDS)
        if 0 <= k < bins:
            counts[k] += 1
    changes = [float((b - a) ** 2) for a, b in itertools.pairwise(counts)]
    return dispersion_of(counts, changes)


def trace_dispersion(trace: str, multiplier: float, scenarios: str) -> Dispersion:
    times = [
        r.arrival for r in azure_trace(trace, rate_multiplier=multiplier, duration=HOUR, loop=True)
    ]
    windows = [
        dispersion(times, k * WINDOW_SECONDS, WINDOW_SECONDS)
        for k in range(int(HOUR // WINDOW_SECONDS))
    ]
    found = sorted(d for d in windows if not math.isnan(d))
    per_second = Counter(math.floor(t) for t in times)
    return Dispersion(
        trace=trace,
        rate_multiplier=multiplier,
        scenarios=scenarios,
        rate=len(times) / HOUR,
        median=statistics.median(found),
        p90=found[min(len(found) - 1, math.ceil(0.9 * len(found)) - 1)],
        highest=found[-1],
        most_in_a_second=max(per_second.values()),
    )


def code_slice(start: float, seconds: float) -> Arrivals:
    """The code trace from `start` for `seconds`, with the warm-up before it, from time 0."""
    first = start - WARMUP_SECONDS
    reqs = [
        replace(r, arrival=r.arrival - first)
        for r in azure_trace("code", rate_multiplier=1.0, duration=start + seconds, loop=True)
        if r.arrival >= first
    ]
    return Arrivals(tuple(reqs), seconds + WARMUP_SECONDS, count_from=WARMUP_SECONDS)


def as_poisson(arrivals: Arrivals, seed: int = 0) -> Arrivals:
    """The same requests (lengths), at Poisson times of the same mean rate over the same span."""
    return _bursts(arrivals, 1.0, 0.0, seed)


def as_bursts(arrivals: Arrivals, spread: float, seed: int) -> Arrivals:
    """The same requests in bursts as big as the counted part's dispersion says: burst starts
    at Poisson times, geometric sizes of mean (dispersion + 1) / 2 (a compound Poisson process
    with that dispersion), each burst's requests uniform over `spread` seconds."""
    counted = [r.arrival for r in arrivals.requests if r.arrival >= arrivals.count_from]
    found = dispersion(counted, arrivals.count_from, arrivals.until - arrivals.count_from)
    return _bursts(arrivals, max(1.0, (found + 1) / 2), spread, seed)


def _bursts(arrivals: Arrivals, size: float, spread: float, seed: int) -> Arrivals:
    """The requests of `arrivals`, in their order, re-timed as the engine model times a bursty
    workload (planning/workload.py burst_times) at their mean rate, each burst over `spread` s;
    requests beyond the last time drawn are left out."""
    rate = len(arrivals.requests) / arrivals.until
    times = burst_times(rate, size, arrivals.until, random.Random(seed), spread)
    timed = zip(times, arrivals.requests, strict=False)
    return replace(arrivals, requests=tuple(replace(r, arrival=at) for at, r in timed))


def one_replay(kind: str, pods: int, tokens: int, start: float, seconds: float) -> Replay:
    """One kind of arrivals (ARRIVALS) for the slice on `pods` pods at `tokens`; a burst kind is
    the mean over BURST_SEEDS draws."""
    sliced = code_slice(start, seconds)
    draws = {
        "trace": [sliced],
        "poisson": [as_poisson(sliced)],
        "bursts 1s": [as_bursts(sliced, 1.0, seed) for seed in range(BURST_SEEDS)],
        "bursts 3s": [as_bursts(sliced, BURST_SECONDS, seed) for seed in range(BURST_SEEDS)],
        "bursts 5s": [as_bursts(sliced, 5.0, seed) for seed in range(BURST_SEEDS)],
    }[kind]
    target = Target(H100.slo.ttft, H100.slo.itl, margin=0.0)
    setting = Setting(load_catalog(), H100.model, target, {})
    c = Candidate(H100.gpu, pods).with_budgets(
        max_num_seqs=MAX_SEQS, max_num_queued_reqs=MAX_QUEUED, max_num_batched_tokens=tokens
    )
    points = [evaluate(c, Workload("trace", "code", trace="code"), a, setting, kind) for a in draws]
    return Replay(
        kind,
        pods,
        tokens,
        statistics.fmean(p.slo_attainment for p in points),
        statistics.fmean(p.ttft_p95_s for p in points),
        statistics.fmean(p.itl_p95_s for p in points),
    )


def write(found: list[Dispersion], replays: list[Replay], meta: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "meta": meta,
        "dispersion": [asdict(d) for d in found],
        "replays": [asdict(r) for r in replays],
    }
    (out / "arrival_burstiness.json").write_text(json.dumps(payload, indent=1) + "\n")
    lines = [
        "# Arrival burstiness: the traces against the Poisson arrivals the engine model replays",
        "",
        f"`{meta['command']}` at {meta['started']}, {meta['cpus']} CPUs. Method: the module "
        "docstring of bench/arrival_burstiness.py.",
        "",
        f"Dispersion of arrivals per {BIN_SECONDS:.0f} s (half the mean squared change between "
        "neighbouring counts, the largest left out, over the mean count; Poisson: about 1), per "
        f"{WINDOW_SECONDS:.0f} s window of the trace's first hour:",
        "",
        "| trace | rate x | scenarios | req/s | median | p90 | highest | most in one second |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {d.trace} | {d.rate_multiplier:g} | {d.scenarios} | {d.rate:.2f} | {d.median:.1f} "
        f"| {d.p90:.1f} | {d.highest:.1f} | {d.most_in_a_second} |"
        for d in found
    ]
    lines += [
        "",
        f"The code trace from second {meta['start']:.0f} for {meta['seconds']:.0f} s on "
        f"{H100.gpu} + {H100.model} (maxSeqs {MAX_SEQS}, maxRequests {MAX_QUEUED}), SLO TTFT "
        f"p95 {H100.slo.ttft:g} s, ITL p95 {H100.slo.itl * 1000:.0f} ms. Each cell: requests in "
        "the SLO / TTFT p95 (s) / ITL p95 (ms); bursts: the mean of "
        f"{BURST_SEEDS} draws.",
        "",
        "| pods | maxBatchedTokens | " + " | ".join(f"{kind} arrivals" for kind in ARRIVALS) + " |",
        "|---|---|" + "---|" * len(ARRIVALS),
    ]
    by_key = {(r.arrivals, r.pods, r.max_batched_tokens): r for r in replays}
    for pods, tokens in sorted({(r.pods, -r.max_batched_tokens) for r in replays}):
        cells = [by_key[(kind, pods, -tokens)] for kind in ARRIVALS]
        lines.append(
            f"| {pods} | {-tokens} | "
            + " | ".join(
                f"{r.slo_share:.1%} / {r.ttft_p95:.2f} / {r.itl_p95 * 1000:.0f}" for r in cells
            )
            + " |"
        )
    lines += [
        "",
        "Each kind of arrivals against the trace's own, over the cells above: the mean and the "
        "largest distance of its share of requests in the SLO (points).",
        "",
        "| arrivals | mean distance | largest |",
        "|---|---|---|",
    ]
    for kind, (mean, most) in distances(replays).items():
        lines.append(f"| {kind} | {mean * 100:.1f} | {most * 100:.1f} |")
    (out / "arrival_burstiness.md").write_text("\n".join(lines) + "\n")
    _plot(replays, out / "arrival_burstiness.png")


def distances(replays: Sequence[Replay]) -> dict[str, tuple[float, float]]:
    """Per kind of arrivals but the trace's: the mean and the largest |share in the SLO - the
    trace's share| over the (pods, maxBatchedTokens) cells both have."""
    trace = {(r.pods, r.max_batched_tokens): r.slo_share for r in replays if r.arrivals == "trace"}
    out: dict[str, tuple[float, float]] = {}
    for kind in ARRIVALS[1:]:
        gaps = [
            abs(r.slo_share - trace[(r.pods, r.max_batched_tokens)])
            for r in replays
            if r.arrivals == kind and (r.pods, r.max_batched_tokens) in trace
        ]
        if gaps:
            out[kind] = (statistics.fmean(gaps), max(gaps))
    return out


def _plot(replays: list[Replay], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(ARRIVALS), figsize=(12, 3.6), sharey=True)
    for ax, kind in zip(axes, ARRIVALS, strict=True):
        for pods in sorted({r.pods for r in replays}):
            mine = sorted(
                (r for r in replays if r.arrivals == kind and r.pods == pods),
                key=lambda r: r.max_batched_tokens,
            )
            ax.plot(
                [r.max_batched_tokens for r in mine],
                [r.slo_share for r in mine],
                "o-",
                label=f"{pods} pods",
            )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("maxBatchedTokens")
        ax.set_title(f"{kind} arrivals", fontsize=9)
    axes[0].set_ylabel("requests in the SLO")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"code trace on {H100.gpu} + {H100.model}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.arrival_burstiness", description=__doc__)
    p.add_argument("--start", type=float, default=300.0, help="trace second the slice starts at")
    p.add_argument("--seconds", type=float, default=600.0, help="the slice's length (s)")
    p.add_argument("--pods", default="3,5,8", help="pod counts, comma-separated")
    p.add_argument(
        "--tokens", default="8192,1024,512", help="maxBatchedTokens values, comma-separated"
    )
    p.add_argument("--jobs", type=int, default=2, help="replays in parallel")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    if not (math.isfinite(args.start) and args.start >= WARMUP_SECONDS):
        raise SystemExit(f"--start: at least {WARMUP_SECONDS:.0f} (the warm-up), got {args.start}")
    if not (math.isfinite(args.seconds) and args.seconds >= 2 * BIN_SECONDS):
        raise SystemExit(f"--seconds: at least {2 * BIN_SECONDS:.0f}, got {args.seconds}")
    args.pods = whole_numbers(args.pods, "--pods")
    args.tokens = whole_numbers(args.tokens, "--tokens")
    if min(args.tokens) < MAX_SEQS:
        least = min(args.tokens)
        raise SystemExit(f"--tokens: vLLM needs at least maxSeqs ({MAX_SEQS}), got {least}")
    at_least_one_job(args.jobs)
    return args


def _progress(r: Replay) -> str:
    return (
        f"{r.arrivals} arrivals, {r.pods} pods, maxBatchedTokens {r.max_batched_tokens}: "
        f"{r.slo_share:.1%} in the SLO, TTFT p95 {r.ttft_p95:.2f} s, ITL p95 "
        f"{r.itl_p95 * 1000:.0f} ms"
    )


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    started = datetime.now(UTC)
    found = [trace_dispersion(*t) for t in TRACES]
    for d in found:
        print(
            f"{d.trace} x{d.rate_multiplier:g}: dispersion median {d.median:.1f}, p90 "
            f"{d.p90:.1f}, {d.most_in_a_second} in one second at most",
            file=sys.stderr,
        )
    jobs = [
        (kind, pods, tokens, args.start, args.seconds)
        for pods in args.pods
        for tokens in args.tokens
        for kind in ARRIVALS
    ]
    replays = run_all(one_replay, jobs, args.jobs, _progress)
    given = sys.argv[1:] if argv is None else argv
    meta = {
        "command": " ".join(["python -m bench.arrival_burstiness", *given]),
        "started": started.strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": os.cpu_count(),
        "start": args.start,
        "seconds": args.seconds,
    }
    write(found, replays, meta, args.out)


if __name__ == "__main__":
    main()
