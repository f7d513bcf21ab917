"""`vllm-twin simulate`: replay a workload on N simulated vLLM replicas in virtual time."""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from vllm_operator.api.durations import duration_arg
from vllm_operator.cli import DAY, UsageError, bounded_seconds, check_number, look_up
from vllm_operator.sim import runner as sim_runner
from vllm_operator.sim import workload as wl
from vllm_operator.sim.balancer import BALANCERS
from vllm_operator.sim.benchserve import BenchServeFigures, bench_serve_figures, format_bench_serve
from vllm_operator.sim.catalog import Catalog, load_catalog
from vllm_operator.sim.closedloop import ClosedLoopSpec, run_closed_loop
from vllm_operator.sim.engine import SimRequest, resolve_config
from vllm_operator.sim.engine.profiles import ProfileError
from vllm_operator.sim.fleet import Fleet
from vllm_operator.sim.records import write_records
from vllm_operator.sim.report import Slo, format_table
from vllm_operator.sim.runner import RunRecord, RunResult
from vllm_twin.argv import add_engine_flags, engine_config_from
from vllm_twin.numeric import (
    MAX_SCHEDULED,
    WEEK,
    add_closed_loop_counts,
    bounded_float,
    bounded_int,
    check_schedule_size,
    json_text,
)

NAME = "simulate"
HELP = "Simulate vLLM 0.33 replicas under a trace or synthetic load, in virtual time."


RATE_MAX = 1e5  # requests/s
MAX_REPLICAS = 1024
_RATE = bounded_float(0, RATE_MAX, open_low=True)
_MULTIPLIER = bounded_float(0, 1e4, open_low=True)
_MEAN = bounded_float(0, 1e7, open_low=True)
_DURATION = bounded_seconds(duration_arg, WEEK)
_OFFSET = bounded_seconds(duration_arg, 1e9, open_low=False)
_SLO = bounded_seconds(duration_arg, DAY)


def _engine_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("vLLM flags (omitted = vLLM's default for the GPU)")
    add_engine_flags(g)  # the twin's `vllm serve` parser takes the same ones


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpu", default="H100-80GB", help="GPU profile (default H100-80GB)")
    p.add_argument("--model", default="Llama-3.1-8B", help="model profile or Hugging Face id")
    p.add_argument("--profiles", metavar="FILE", help="YAML overriding or adding profiles")
    p.add_argument("--replicas", type=bounded_int(1, MAX_REPLICAS), default=1)
    p.add_argument("--balancer", choices=tuple(BALANCERS), default="round_robin")
    p.add_argument("--seed", type=int, default=0)
    w = p.add_argument_group(
        "workload (one of --trace, --poisson, --ramp, --concurrency; default --trace conv)"
    )
    src = w.add_mutually_exclusive_group()
    src.add_argument("--trace", metavar="conv|code|FILE", help="Azure LLM trace 2023 or a CSV")
    src.add_argument("--poisson", type=_RATE, metavar="RATE", help="Poisson arrivals, req/s")
    src.add_argument("--ramp", metavar="FROM:TO", help="rate rising linearly, req/s")
    src.add_argument(
        "--concurrency",
        type=bounded_int(1, MAX_SCHEDULED),
        metavar="N",
        help="closed loop: N requests in flight, as vllm bench serve --max-concurrency N",
    )
    add_closed_loop_counts(w, num_prompts=1000)
    w.add_argument("--rate-multiplier", type=_MULTIPLIER, default=1.0, help="trace speed-up")
    w.add_argument("--trace-start", type=_OFFSET, default=0.0, help="offset into the trace")
    w.add_argument("--loop", action="store_true", help="repeat the trace to fill --duration")
    w.add_argument("--duration", type=_DURATION, help="virtual seconds of arrivals, e.g. 600s")
    w.add_argument("--prompt-mean", type=_MEAN, default=1024, help="synthetic prompt tokens")
    w.add_argument("--output-mean", type=_MEAN, default=256, help="synthetic output tokens")
    w.add_argument(
        "--length-dist",
        choices=("fixed", "exponential", "lognormal"),
        help="default: fixed with --concurrency (bench serve's random dataset), else exponential",
    )
    _engine_flags(p)
    o = p.add_argument_group("output")
    o.add_argument("--slo-ttft", type=_SLO, help="goodput SLO on TTFT, e.g. 500ms")
    o.add_argument("--slo-itl", type=_SLO, help="goodput SLO on per-request ITL p95")
    o.add_argument("--json", action="store_true", help="print figures as JSON")
    o.add_argument("--records", metavar="FILE", help="per-request records (.csv or .jsonl)")
    o.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _positive(flag: str, value: float | None, *, allow_zero: bool = False) -> None:
    if value is not None and (value < 0 or (value == 0 and not allow_zero) or math.isnan(value)):
        raise UsageError(f"{flag} must be {'>= 0' if allow_zero else '> 0'}, got {value}")


def _ramp(text: str) -> tuple[float, float]:
    try:
        start, end = (float(part) for part in text.split(":"))
        for rate in (start, end):
            check_number(rate, 0, RATE_MAX)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"--ramp: each rate {exc}") from None
    except ValueError:
        raise UsageError(f"--ramp must be FROM:TO in req/s, got {text!r}") from None
    return start, end


def _lengths(args: argparse.Namespace) -> tuple[wl.LengthDist, wl.LengthDist]:
    default = "fixed" if args.concurrency is not None else "exponential"
    kind = args.length_dist or default
    return wl.LengthDist(kind, args.prompt_mean), wl.LengthDist(kind, args.output_mean)


def _closed_loop(args: argparse.Namespace) -> ClosedLoopSpec:
    _positive("--prompt-mean", args.prompt_mean)
    _positive("--output-mean", args.output_mean)
    prompt, output = _lengths(args)
    try:
        return ClosedLoopSpec(
            args.concurrency, args.num_prompts, prompt, output, args.warmup, args.seed
        )
    except ValueError as exc:
        flag = str(exc).split()[0].replace("_", "-")
        raise UsageError(f"--{flag}: {exc}") from None


def _workload(args: argparse.Namespace) -> tuple[list[SimRequest], float, str]:
    _positive("--rate-multiplier", args.rate_multiplier)
    _positive("--duration", args.duration)
    _positive("--trace-start", args.trace_start, allow_zero=True)
    _positive("--prompt-mean", args.prompt_mean)
    _positive("--output-mean", args.output_mean)
    synthetic = args.poisson is not None or args.ramp is not None
    if synthetic:
        if args.duration is None:
            raise UsageError("--duration is required with --poisson and --ramp")
        prompt, output = _lengths(args)
        if args.poisson is not None:
            check_schedule_size(args.poisson * args.duration, "--poisson x --duration")
            reqs = wl.poisson(args.poisson, args.duration, prompt, output, args.seed)
            return reqs, args.duration, f"poisson {args.poisson} req/s"
        start, end = _ramp(args.ramp)
        check_schedule_size((start + end) / 2 * args.duration, "--ramp x --duration")
        reqs = wl.ramp(start, end, args.duration, prompt, output, args.seed)
        return reqs, args.duration, f"ramp {start}->{end} req/s"
    trace = args.trace or "conv"
    try:
        if args.loop and args.duration is not None:
            _check_looped_trace(trace, args)
        reqs = wl.azure_trace(
            trace,
            rate_multiplier=args.rate_multiplier,
            start=args.trace_start,
            duration=args.duration,
            loop=args.loop,
        )
    except (OSError, ValueError) as exc:
        raise UsageError(f"--trace {trace}: {exc}") from None
    until = args.duration if args.duration is not None else (reqs[-1].arrival if reqs else 0.0)
    return reqs, until, f"trace {trace} x{args.rate_multiplier}"


def _check_looped_trace(trace: str, args: argparse.Namespace) -> None:
    """A looped trace repeats until --duration: estimate the count from one pass first."""
    one_pass = wl.azure_trace(trace, rate_multiplier=args.rate_multiplier, start=args.trace_start)
    if one_pass:
        span = max(one_pass[-1].arrival, 1e-9)
        check_schedule_size(len(one_pass) * args.duration / span, "--loop x --duration")


def _profiles(args: argparse.Namespace) -> Catalog:
    try:
        return load_catalog(args.profiles)
    except ProfileError as exc:
        raise UsageError(f"--profiles: {exc}") from None


def _write_records(path: str, records: Sequence[RunRecord]) -> None:
    try:
        write_records(Path(path), records)
    except OSError as exc:
        raise UsageError(f"--records {path}: {exc.strerror}") from None


def _progress(quiet: bool) -> Callable[[float], None] | None:
    if quiet:
        return None
    started = time.perf_counter()

    def report(now: float) -> None:
        elapsed = time.perf_counter() - started
        if elapsed > 2.0:  # only long runs get a progress line
            print(f"simulate: t={now:.0f}s virtual, {elapsed:.1f}s wall", file=sys.stderr)

    return report


def simulate(args: argparse.Namespace) -> tuple[RunResult | BenchServeFigures, dict[str, Any]]:
    """An open-loop run (RunResult) or, with --concurrency, a closed loop's bench-serve figures."""
    catalog = _profiles(args)
    gpu = look_up("--gpu", catalog.gpu, args.gpu)
    model = look_up("--model", catalog.model, args.model)
    if (args.slo_ttft is None) != (args.slo_itl is None):
        raise UsageError("--slo-ttft and --slo-itl go together")
    cfg = engine_config_from(args)
    try:
        resolved = resolve_config(cfg, gpu, model, catalog.coefficients)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    fleet = Fleet(
        cfg,
        gpu,
        model,
        args.replicas,
        balancer=args.balancer,
        seed=args.seed,
        coeffs=catalog.coefficients,
    )
    meta: dict[str, Any] = {
        "gpu": gpu.name,
        "model": model.name,
        "replicas": args.replicas,
        "balancer": args.balancer,
        "seed": args.seed,
        "engine": {k: v for k, v in asdict(resolved).items() if k not in ("gpu", "model")},
    }
    if args.concurrency is not None:
        spec = _closed_loop(args)
        started = time.perf_counter()
        samples = run_closed_loop(spec, fleet)
        meta["workload"] = f"closed loop, concurrency {spec.concurrency}"
        meta["wall_seconds"] = round(time.perf_counter() - started, 3)
        return bench_serve_figures(samples), meta
    reqs, until, label = _workload(args)
    slo = Slo(args.slo_ttft, args.slo_itl) if args.slo_ttft is not None else None
    started = time.perf_counter()
    result = sim_runner.run(reqs, fleet, until, slo=slo, progress=_progress(args.quiet))
    meta.update(workload=label, until=until, wall_seconds=round(time.perf_counter() - started, 3))
    return result, meta


def run(args: argparse.Namespace) -> int:
    result, meta = simulate(args)
    if isinstance(result, BenchServeFigures):
        return _print_closed(result, meta, as_json=args.json)
    if args.records:
        _write_records(args.records, result.records)
    if args.json:
        print(json_text({**meta, "figures": result.figures.as_dict()}))
        return 0
    print(
        f"{meta['replicas']} x {meta['gpu']} / {meta['model']}, {meta['workload']}, "
        f"{meta['until']:.0f}s, balancer {meta['balancer']}"
    )
    _print_engine(meta["engine"])
    print(format_table(result.figures))
    print(f"simulated in {meta['wall_seconds']:.1f}s wall, {result.steps} engine steps")
    return 0


def _print_closed(figures: BenchServeFigures, meta: dict[str, Any], *, as_json: bool) -> int:
    if as_json:
        print(json_text({**meta, "figures": figures.as_dict()}))
        return 0
    print(f"{meta['replicas']} x {meta['gpu']} / {meta['model']}, {meta['workload']}")
    _print_engine(meta["engine"])
    print(format_bench_serve(figures))
    print(f"simulated in {meta['wall_seconds']:.1f}s wall")
    return 0


def _print_engine(engine: dict[str, Any]) -> None:
    print(
        f"engine: max_num_seqs {engine['max_num_seqs']}, max_num_active_seqs "
        f"{engine['max_num_active_seqs']}, max_num_batched_tokens "
        f"{engine['max_num_batched_tokens']}, KV {engine['num_gpu_blocks']} blocks "
        f"({engine['num_gpu_blocks'] * engine['block_size']} tokens), max_model_len "
        f"{engine['max_model_len']}"
    )
