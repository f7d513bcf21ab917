"""`vllm-operator plan`: the budgets, replicas and GPU type for a workload and an SLO, planned in
the engine model (docs/planning.md), and the VLLMService that runs them."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from vllm_operator.api.budgets import BUDGET_FIELDS
from vllm_operator.api.durations import duration_arg
from vllm_operator.api.spec import DNS_LABEL_PATTERN
from vllm_operator.cli import DAY, UsageError, bounded_seconds, look_up
from vllm_operator.config import OperatorConfig
from vllm_operator.planning.candidate import Target, service_name
from vllm_operator.planning.evaluate import Setting
from vllm_operator.planning.lengths import SYNTAX, LengthSyntaxError, parse_lengths
from vllm_operator.planning.manifest import build_recommended_service
from vllm_operator.planning.output import build_contract, format_table
from vllm_operator.planning.planner import PlanResult, Sweep, plan
from vllm_operator.planning.search import NoPlanError
from vllm_operator.planning.workload import Workload
from vllm_operator.sim.catalog import Catalog, load_catalog
from vllm_operator.sim.engine.profiles import ModelProfile, ProfileError
from vllm_operator.sim.workload import LengthDist

NAME = "plan"
HELP = "Plan vLLM budgets, replicas and GPU type for a workload and an SLO, in the engine model."
MAX_REPLICAS = 1024
SWEEP_KNOBS = {f.flag.removeprefix("--"): f.dest for f in BUDGET_FIELDS}
_SECONDS = bounded_seconds(duration_arg, DAY)
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def _number(low: float, high: float, kind: Callable[[str], float] = float) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in [{low:g}, {high:g}], got {text}")
        return value

    return parse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--gpu", action="append", required=True, metavar="TYPE", help="GPU type (repeat)"
    )
    p.add_argument("--gpu-cost", metavar="TYPE=COST,...", help="$ per GPU-hour, by GPU type")
    p.add_argument("--model", required=True, help="model profile or Hugging Face id")
    w = p.add_argument_group(
        "workload (one of --trace, --poisson, --concurrency, --from-prometheus)"
    )
    src = w.add_mutually_exclusive_group(required=True)
    src.add_argument("--trace", metavar="conv|code|FILE", help="Azure LLM trace 2023 or a CSV")
    src.add_argument("--poisson", type=_number(1e-6, 1e5), metavar="RATE", help="req/s")
    src.add_argument(
        "--concurrency", type=_number(1, 100_000, int), metavar="N", help="closed loop"
    )
    src.add_argument("--from-prometheus", metavar="URL", help="read the workload of --service")
    w.add_argument("--rate-multiplier", type=_number(1e-3, 1e4), default=1.0, metavar="X",
                   help="trace speed-up")  # fmt: skip
    w.add_argument("--service", metavar="NAMESPACE/NAME", help="the VLLMService to read or name")
    w.add_argument("--window", type=_SECONDS, default=3600.0, metavar="DURATION",
                   help="Prometheus range (default 1h)")  # fmt: skip
    w.add_argument("--prompt-len", metavar="DIST", help=f"prompt tokens: {SYNTAX}")
    w.add_argument("--output-len", metavar="DIST", help=f"output tokens: {SYNTAX}")
    s = p.add_argument_group("SLO")
    s.add_argument("--slo-ttft", type=_SECONDS, required=True, metavar="DURATION",
                   help="TTFT p95, e.g. 800ms")  # fmt: skip
    s.add_argument("--slo-itl", type=_SECONDS, metavar="DURATION", help="ITL p95, e.g. 50ms")
    s.add_argument("--max-rejection-ratio", type=_number(0, 1), default=0.01, metavar="R",
                   help="503 share (default 0.01)")  # fmt: skip
    o = p.add_argument_group("search and output")
    o.add_argument("--sweep", metavar="KNOB=V1,V2,..", help="one budget flag on a fixed grid")
    o.add_argument("--max-replicas", type=_number(1, MAX_REPLICAS, int), default=16, metavar="N",
                   help="per GPU type (default 16)")  # fmt: skip
    o.add_argument("-o", "--output", choices=("table", "yaml", "json"), default="table")
    o.add_argument("--plot", metavar="FILE.png", help="throughput against latency per point")


def _costs(text: str | None, gpus: list[str]) -> dict[str, float]:
    costs: dict[str, float] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        gpu, sep, value = part.partition("=")
        try:
            cost = float(value)
        except ValueError:
            cost = math.nan
        if not sep or not math.isfinite(cost) or cost < 0:
            raise UsageError(f"--gpu-cost: {part!r} is not TYPE=COST with COST >= 0")
        costs[gpu.strip()] = cost
    extra = sorted(set(costs) - set(gpus))
    if extra:
        raise UsageError(f"--gpu-cost names {', '.join(extra)}, which no --gpu asks for")
    missing = [g for g in gpus if g not in costs]
    if len(gpus) > 1 and missing:
        raise UsageError(
            f"--gpu-cost must price every --gpu to compare them; missing {', '.join(missing)}"
        )
    return costs


def _sweep(text: str | None) -> Sweep | None:
    if text is None:
        return None
    knob, _, values = text.partition("=")
    if knob.strip() not in SWEEP_KNOBS:
        raise UsageError(f"--sweep: {knob!r} is not one of {', '.join(SWEEP_KNOBS)}")
    try:
        grid = tuple(int(v) for v in values.split(","))
    except ValueError:
        raise UsageError(f"--sweep: {values!r} is not a list of integers (e.g. 16,32,48)") from None
    if not grid or min(grid) < 1:
        raise UsageError("--sweep: every value must be an integer >= 1")
    return Sweep(SWEEP_KNOBS[knob.strip()], grid)


def _lengths(flag: str, text: str | None) -> Any:
    if text is None:
        return None
    try:
        return parse_lengths(text)
    except LengthSyntaxError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def _service(text: str | None) -> tuple[str | None, str | None]:
    if text is None:
        return None, None
    ns, sep, name = text.partition("/")
    if not sep or not ns or not name:
        raise UsageError(f"--service: {text!r} is not NAMESPACE/NAME")
    # checked now, not when the manifest is built after the whole search
    for part in (ns, name):
        if len(part) > 63 or not re.fullmatch(DNS_LABEL_PATTERN, part):
            raise UsageError(
                f"--service: {part!r} is not a DNS label (at most 63 lower-case letters, "
                "digits and '-', starting and ending with a letter or digit)"
            )
    return ns, name


def _check_plot(path: str | None) -> None:
    """Refuse a --plot matplotlib cannot write before planning, not after."""
    if path is None:
        return
    target = Path(path)
    if target.suffix.lower() not in PLOT_SUFFIXES:
        raise UsageError(f"--plot {path}: the name must end in {', '.join(PLOT_SUFFIXES)}")
    if target.is_dir():
        raise UsageError(f"--plot {path}: is a directory; name a file in it")
    if not target.parent.is_dir():
        raise UsageError(f"--plot {path}: no directory {str(target.parent)!r}")


def _typical(lengths: LengthDist) -> float:
    # uniform keeps its low bound in `mean` and its high bound in `spread`
    return (lengths.mean + lengths.spread) / 2 if lengths.kind == "uniform" else lengths.mean


def _check_fits(workload: Workload, model: ModelProfile) -> None:
    """Refuse lengths the model cannot hold: vLLM would answer every request with a 400."""
    given = [d for d in (workload.prompt, workload.output) if isinstance(d, LengthDist)]
    total = sum(_typical(d) for d in given)
    if given and total > model.max_model_len:
        raise UsageError(
            f"--prompt-len plus --output-len average {total:.0f} tokens, more than "
            f"{model.name}'s max_model_len {model.max_model_len}; shorten them"
        )


def _workload(args: argparse.Namespace) -> Workload:
    prompt = _lengths("--prompt-len", args.prompt_len)
    output = _lengths("--output-len", args.output_len)
    if args.from_prometheus is not None:
        from vllm_operator.commands.plan_prometheus import read_workload

        return read_workload(args, prompt, output)
    if args.trace is not None:
        label = f"trace {args.trace} x{args.rate_multiplier:g}"
        return Workload("trace", label, trace=args.trace, rate_multiplier=args.rate_multiplier,
                        prompt=prompt, output=output)  # fmt: skip
    flag = "--poisson" if args.poisson is not None else "--concurrency"
    if prompt is None or output is None:
        raise UsageError(f"{flag} needs --prompt-len and --output-len")
    if args.poisson is not None:
        return Workload("poisson", f"poisson {args.poisson:g} req/s", rate=args.poisson,
                        prompt=prompt, output=output)  # fmt: skip
    return Workload("closed", f"closed loop, concurrency {args.concurrency}",
                    concurrency=args.concurrency, prompt=prompt, output=output)  # fmt: skip


def _catalog(args: argparse.Namespace) -> tuple[Catalog, str, str]:
    """The profiles, the model's profile name and the model id the VLLMService serves."""
    try:
        catalog = load_catalog()
    except ProfileError as exc:
        raise UsageError(str(exc)) from None
    known = OperatorConfig().gpu_catalog.known()  # what a VLLMService's spec.gpu.type may name
    for gpu in args.gpu:
        look_up("--gpu", catalog.gpu, gpu)
        if gpu not in known:
            raise UsageError(
                f"--gpu: {gpu!r} has an engine profile but is not in the operator's GPU "
                f"catalog; known: {', '.join(known)}"
            )
    profile = look_up("--model", catalog.model, args.model)
    model_id = args.model if "/" in args.model else (profile.aliases or (profile.name,))[0]
    return catalog, profile.name, model_id


def _progress() -> Callable[[str], None]:
    started = time.perf_counter()

    def say(text: str) -> None:
        print(f"plan [{time.perf_counter() - started:5.1f}s] {text}", file=sys.stderr)

    return say


def run(args: argparse.Namespace) -> int:
    catalog, profile, model_id = _catalog(args)
    costs = _costs(args.gpu_cost, args.gpu)
    sweep = _sweep(args.sweep)
    namespace, name = _service(args.service)
    _check_plot(args.plot)
    if args.from_prometheus is not None and name is None:
        raise UsageError("--from-prometheus needs --service NAMESPACE/NAME")
    try:
        workload = _workload(args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _check_fits(workload, catalog.model(profile))
    target = Target(args.slo_ttft, args.slo_itl, args.max_rejection_ratio)
    setting = Setting(catalog, profile, target, costs)
    started = time.perf_counter()
    say = _progress()
    try:
        result = plan(workload, args.gpu, setting, max_replicas=args.max_replicas, sweep=sweep,
                      progress=say)  # fmt: skip
    except NoPlanError as exc:
        raise UsageError(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    say(f"{len(result.points)} evaluations in {time.perf_counter() - started:.1f}s")
    try:
        manifest = build_recommended_service(
            result.chosen.recommendation.candidate,
            model=model_id,
            name=name or service_name(model_id),
            namespace=namespace,
            target=target,
            busy=result.stats,
            mean=result.whole_stats,
            max_replicas=args.max_replicas,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.plot:
        from vllm_operator.commands.plan_plot import write_plot

        write_plot(args.plot, result, target)
    _print(args.output, result, manifest, target)
    return 0


def _print(fmt: str, result: PlanResult, manifest: dict[str, Any], target: Target) -> None:
    if fmt == "json":
        print(json.dumps(build_contract(result, manifest, target), indent=2))
    elif fmt == "yaml":
        sys.stdout.write(yaml.safe_dump(manifest, sort_keys=False))
    else:
        print(format_table(result, target))
