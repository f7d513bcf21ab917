"""`vllm-twin loadgen`: open-loop load against local twins, with client-side figures."""

from __future__ import annotations

import argparse
import asyncio
import random

from vllm_operator.api.durations import duration_arg
from vllm_operator.cli import DAY, UsageError, bounded_seconds
from vllm_operator.sim.benchserve import bench_serve_figures, format_bench_serve
from vllm_operator.sim.closedloop import ClosedLoopSpec
from vllm_operator.sim.workload import LengthDist
from vllm_twin.loadgen.backoff import RetryPolicy
from vllm_twin.loadgen.report import Slo, render_table, report_to_dict, summarize_outcomes
from vllm_twin.loadgen.runner import LoadSpec, run_closed_load, run_load
from vllm_twin.loadgen.targets import check_target
from vllm_twin.loadgen.trace import (
    Arrival,
    bounded,
    poisson,
    read_trace,
    replay,
    resolve_trace,
)
from vllm_twin.numeric import (
    MAX_SCHEDULED,
    WEEK,
    add_closed_loop_counts,
    bounded_float,
    bounded_int,
    check_schedule_size,
    json_text,
)

NAME = "loadgen"
HELP = "Send open- or closed-loop /v1/completions load to loopback twins; report latency figures."


_SPAN = bounded_seconds(duration_arg, DAY)
_TOKENS = bounded_int(1, 10**7)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--target",
        action="append",
        required=True,
        metavar="URL",
        help="base URL of a twin, e.g. http://127.0.0.1:8000 (repeat for round-robin); "
        "loopback hosts only",
    )
    p.add_argument(
        "--trace",
        metavar="conv|code|FILE",
        help="Azure LLM trace 2023 (conv, code) or a CSV with the same columns",
    )
    p.add_argument(
        "--rate-multiplier",
        type=bounded_float(0, 1e4, open_low=True),
        default=1.0,
        help="replay the trace this many times faster (default 1)",
    )
    p.add_argument(
        "--rate",
        type=bounded_float(0, 1e5, open_low=True),
        help="Poisson arrivals at this many requests/s; lengths from --trace if given",
    )
    p.add_argument(
        "--prompt-tokens",
        type=_TOKENS,
        default=256,
        help="prompt length without --trace (default 256)",
    )
    p.add_argument(
        "--max-tokens", type=_TOKENS, default=64, help="max_tokens without --trace (default 64)"
    )
    p.add_argument(
        "--duration",
        type=bounded_seconds(duration_arg, WEEK),
        help="schedule requests for this long, e.g. 60s (open loop: required)",
    )
    p.add_argument(
        "--concurrency",
        type=bounded_int(1, MAX_SCHEDULED),
        metavar="N",
        help="closed loop instead: N requests in flight (vllm bench serve --max-concurrency N), "
        "fixed --prompt-tokens/--max-tokens, a vllm bench serve report",
    )
    add_closed_loop_counts(p, num_prompts=100)
    p.add_argument(
        "--max-requests",
        type=bounded_int(1, MAX_SCHEDULED),
        help=f"schedule at most this many requests (at most {MAX_SCHEDULED:,})",
    )
    p.add_argument(
        "--stream", action="store_true", help="stream answers (needed for TTFT, ITL and goodput)"
    )
    p.add_argument(
        "--retry-503",
        action="store_true",
        help="retry 503 answers on the next target with jittered backoff",
    )
    p.add_argument(
        "--retry-deadline",
        type=_SPAN,
        default=30.0,
        help="no retry starts later than this after the first attempt (default 30s)",
    )
    p.add_argument("--backoff-base", type=_SPAN, default=0.5, help="default 0.5s")
    p.add_argument("--backoff-max", type=_SPAN, default=8.0, help="default 8s")
    p.add_argument("--request-timeout", type=_SPAN, default=60.0, help="per attempt (default 60s)")
    p.add_argument("--slo-ttft", type=_SPAN, default=0.5, help="goodput SLO (default 500ms)")
    p.add_argument("--slo-tpot", type=_SPAN, default=0.06, help="goodput SLO (default 60ms)")
    p.add_argument(
        "--time-scale",
        type=bounded_float(0, 1e4, open_low=True),
        default=1.0,
        help="the twins' --time-scale: times are given and reported in twin seconds",
    )
    p.add_argument("--model", help="model field of each request (default: omitted)")
    p.add_argument("--seed", type=int, default=0, help="seed for Poisson arrivals and jitter")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def _capped(arrivals: list[Arrival]) -> list[Arrival]:
    if len(arrivals) > MAX_SCHEDULED:
        check_schedule_size(len(arrivals), "the trace")
    return arrivals


def build_schedule(args: argparse.Namespace) -> list[Arrival]:
    """The whole run's arrivals from the command line; UsageError for a bad combination."""
    if args.duration is None:
        raise UsageError("--duration is required without --concurrency")
    if args.trace is None and args.rate is None:
        raise UsageError("one of --trace or --rate is required")
    if args.max_requests is not None and args.max_requests < 1:
        raise UsageError("--max-requests must be >= 1")
    if args.rate is not None and args.max_requests is None:
        check_schedule_size(args.rate * args.duration, "--rate x --duration")
    # One past the cap: a schedule that would exceed it is refused, not silently cut.
    limit = args.max_requests if args.max_requests is not None else MAX_SCHEDULED + 1
    try:
        if args.trace is not None:
            rows = read_trace(resolve_trace(args.trace))
            if args.rate is None:
                replayed = replay(rows, args.rate_multiplier)
                return _capped(bounded(replayed, args.duration, limit))
            lengths = [(r.prompt_tokens, r.output_tokens) for r in rows]
        else:
            if args.prompt_tokens < 1 or args.max_tokens < 1:
                raise UsageError("--prompt-tokens and --max-tokens must be >= 1")
            lengths = [(args.prompt_tokens, args.max_tokens)]
        arrivals = poisson(args.rate, lengths, random.Random(args.seed))
        return _capped(bounded(arrivals, args.duration, limit))
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def closed_loop_spec(args: argparse.Namespace) -> ClosedLoopSpec:
    if args.trace is not None or args.rate is not None:
        raise UsageError("--concurrency takes --prompt-tokens and --max-tokens, not a schedule")
    try:
        return ClosedLoopSpec(
            args.concurrency,
            args.num_prompts,
            LengthDist("fixed", args.prompt_tokens),
            LengthDist("fixed", args.max_tokens),
            args.warmup,
            args.seed,
        )
    except ValueError as exc:
        flag = str(exc).split()[0].replace("_", "-")
        raise UsageError(f"--{flag}: {exc}") from exc


def run(args: argparse.Namespace) -> int:
    closed = closed_loop_spec(args) if args.concurrency is not None else None
    try:
        targets = tuple(check_target(t) for t in args.target)
        retry = (
            RetryPolicy(args.retry_deadline, args.backoff_base, args.backoff_max)
            if args.retry_503
            else None
        )
        spec = LoadSpec(
            targets=targets,
            arrivals=tuple(build_schedule(args)) if closed is None else (),
            stream=args.stream,
            retry=retry,
            model=args.model,
            time_scale=args.time_scale,
            request_timeout=args.request_timeout,
            seed=args.seed,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if closed is not None:
        figures = bench_serve_figures(asyncio.run(run_closed_load(spec, closed)))
        if args.json:
            print(json_text(figures.as_dict()))
        else:
            print(format_bench_serve(figures))
        return 0
    outcomes = asyncio.run(run_load(spec))
    report = summarize_outcomes(outcomes, Slo(ttft=args.slo_ttft, tpot=args.slo_tpot))
    if args.json:
        print(json_text(report_to_dict(report)))
    else:
        print(render_table(report))
    return 0
