"""Simulate a measured point with the workload its source ran, and compare the figures.

One reading of the measurement set for everything that judges or fits the twin (the fidelity
benchmark, `vllm-twin calibrate`):
- `serve` points are a closed loop (`sim.closedloop`): `--max-concurrency N` keeps N in
  flight; `unlimited` at rate `inf` sends every prompt at once. A finite request rate is an
  open-loop Poisson stream of `num_prompts` requests.
- `offline-latency` is one batch of `batch_size` requests sent at once; the batch's latency is
  the time until the last one finishes. `offline-throughput` sends `num_prompts` at once
  (vLLM's benchmark_throughput default of 1000 when the source does not say). Offline runs
  have no API server, so the API-side delays are zero there.
- Lengths: fixed where the source gives them; a ShareGPT prompt is lognormal (sigma 1) around
  the source's own mean (total tokens / completed) or, without totals, GPUStack's ShareGPT x1000
  means (217 in, 202 out). An output cap without `ignore_eos` takes the measured mean output
  when the source gives its totals.
- A source whose client is `vllm bench serve --backend openai-chat` sends chat requests (the
  API server's `api_chat_cost`); every other one /v1/completions.
- Defaults are those of the run, not vLLM 0.33's where they differ (`release_defaults`): a
  release before 0.20.0 used 90% of GPU memory, not 92%; the offline benchmarks build an `LLM`,
  whose token budget and sequence cap are larger than `vllm serve`'s; a point's
  `scheduler_budget` names the tier its build applied. A flag the source set wins over all of it.
- A quantity the point lists under `excluded` (with its source-based reason) is not compared,
  so it is neither fitted nor judged; the fidelity benchmark prints each one with its reason.
- Each quantity compares the same statistic on both sides: the median where the source gives
  one, else the mean (p95/p99 are not compared: a few hundred requests make them noisy).
"""

from __future__ import annotations

import dataclasses
import math
import re
import shlex
from dataclasses import dataclass

from vllm_operator.sim.benchserve import BenchServeFigures, bench_serve_figures
from vllm_operator.sim.catalog import Catalog
from vllm_operator.sim.closedloop import ClosedLoopSpec, run_closed_loop
from vllm_operator.sim.engine import EngineConfig, GpuProfile, StepCoefficients
from vllm_operator.sim.fleet import Fleet
from vllm_operator.sim.workload import LengthDist
from vllm_operator.vllm.defaults import LARGE, MEDIUM, SMALL, BatchDefaults, batch_defaults
from vllm_twin.argv import ArgvError, parse_vllm_argv
from vllm_twin.calibration.measurements import Point, Stats

SHAREGPT_MEANS = (217.4, 201.6)  # GPUStack's ShareGPT x1000 totals / 1000 (measurements.yaml)
# a source whose client sent chat requests (api_chat_cost applies); any other serve point is a
# /v1/completions client (`vllm bench serve`'s default backend)
CHAT_BACKEND = "--backend openai-chat"
OFFLINE_THROUGHPUT_PROMPTS = 1000  # vllm/benchmarks/throughput.py --num-prompts default
# flags the twin's parser refuses and the engine model does not need: (flag, values it takes);
# --swap-space is gone in vLLM 0.33, --tokenizer-mode only changes the tokeniser
_DROPPED_FLAGS = {"--swap-space": 1, "--tokenizer-mode": 1}
_ESTIMATED_MAX = re.compile(r"estimated maximum model length is (\d+)")
# vLLM's defaults that changed before 0.33 (docs/vllm-0.33.md §1.3 and §6): 0.9 of GPU memory
# through 0.19.0; no >= 160 GiB tier before 0.28.0 (such a GPU got the 70 GiB tier's budgets)
OLD_GPU_MEMORY_UTILIZATION = 0.9
GPU_MEMORY_UTILIZATION_092_SINCE = (0, 20)
LARGE_TIER_SINCE = (0, 28)
_UTILIZATION_FLAGS = {"--gpu-memory-utilization", "--device-memory-utilization"}
# the offline benchmarks' `LLM` (usage context LLM_CLASS) gets larger budgets than `vllm serve`
# on the same device (EngineArgs.get_batch_defaults, vllm/engine/arg_utils.py)
OFFLINE_BATCH_DEFAULTS = {MEDIUM: BatchDefaults(16384, 1024), SMALL: BatchDefaults(8192, 256)}
# Setup.scheduler_budget: the tier a run's build gave its device, where not the 0.33 one
BUDGET_TIERS = {"large": LARGE, "medium": MEDIUM, "small": SMALL}

# quantity -> its group in the summary
GROUPS = {
    "ttft_ms": "TTFT",
    "tpot_ms": "TPOT/ITL",
    "itl_ms": "TPOT/ITL",
    "request_throughput_rps": "throughput",
    "output_throughput_tps": "throughput",
    "total_throughput_tps": "throughput",
    "token_throughput_unspecified_tps": "throughput",
    "e2el_ms": "latency",
    "latency_ms": "latency",
}


class NotSimulableError(ValueError):
    """The point lacks what a simulation needs (a profile, a length); the message says what."""


@dataclass(frozen=True)
class Comparison:
    quantity: str  # a Measured field, with the statistic: "ttft_ms.median"
    group: str
    measured: float
    simulated: float

    @property
    def error(self) -> float:
        """Relative error of the simulation: (simulated - measured) / measured."""
        return (self.simulated - self.measured) / self.measured


@dataclass(frozen=True)
class Replayed:
    point: Point
    spec: ClosedLoopSpec
    offline: bool
    figures: BenchServeFigures
    comparisons: tuple[Comparison, ...]
    note: str = ""


def replay_point(
    point: Point, catalog: Catalog, coeffs: StepCoefficients | None = None
) -> Replayed:
    """Simulate `point` on its profiles (coefficients: the catalog's unless given)."""
    setup, work = point.setup, point.workload
    if setup.gpu_profile in (None, "unknown") or setup.model_profile is None:
        raise NotSimulableError(f"no twin profile for {setup.gpu_type} / {setup.model}")
    gpu, model = catalog.gpu(setup.gpu_profile), catalog.model(setup.model_profile)
    coeffs = coeffs or catalog.coefficients
    offline = work.mode != "serve"
    if offline:
        coeffs = dataclasses.replace(
            coeffs, api_overhead=0.0, api_request_cost=0.0, finish_overhead=0.0, output_delay=0.0
        )
    if work.mode == "serve" and work.request_rate not in ("inf", "unknown"):
        raise NotSimulableError(
            f"request rate {work.request_rate}/s: open-loop points not replayed yet"
        )
    spec = workload_spec(point)
    cfg, note = release_defaults(point, engine_config(point), gpu), ""
    try:
        fleet = Fleet(cfg, gpu, model, 1, coeffs=coeffs)
    except ValueError as exc:
        # the twin's memory model can miss a fit real vLLM made by a few blocks: serve at the
        # largest max_model_len it finds, as its error message suggests, and say so
        found = _ESTIMATED_MAX.search(str(exc))
        if found is None:
            raise NotSimulableError(f"vLLM startup: {exc}") from None
        cfg = dataclasses.replace(cfg, max_model_len=int(found.group(1)))
        note = f"max_model_len lowered to {cfg.max_model_len}: the twin's KV sizing is short"
        fleet = Fleet(cfg, gpu, model, 1, coeffs=coeffs)
    figures = bench_serve_figures(run_closed_loop(spec, fleet))
    return Replayed(point, spec, offline, figures, compare(point, figures), note)


def workload_spec(point: Point) -> ClosedLoopSpec:
    work, measured = point.workload, point.measured
    count = _count(point)
    if work.mode == "offline-latency":
        assert work.batch_size is not None  # the schema requires it for this mode
        concurrency = work.batch_size
    elif isinstance(work.max_concurrency, int):
        concurrency = work.max_concurrency
    else:
        concurrency = count  # unlimited (or an offline batch): everything at once
    done = measured.completed or count
    means = {
        "input": measured.total_input_tokens / done if measured.total_input_tokens else None,
        "output": _mean_output(point, done),
    }
    prompt = _length(work.input_len, means["input"], SHAREGPT_MEANS[0], "input_len", cap=False)
    output = _length(
        work.output_len,
        means["output"] if work.ignore_eos is not True else None,
        SHAREGPT_MEANS[1],
        "output_len",
        cap=True,
    )
    chat = CHAT_BACKEND in point.source.tool
    return ClosedLoopSpec(concurrency, count, prompt, output, warmup=0, seed=0, chat=chat)


def _count(point: Point) -> int:
    work, measured = point.workload, point.measured
    if work.mode == "offline-latency":
        assert work.batch_size is not None
        return work.batch_size
    if isinstance(work.num_prompts, int):
        return work.num_prompts
    if measured.completed:
        return measured.completed
    if work.mode == "offline-throughput":
        return OFFLINE_THROUGHPUT_PROMPTS
    if isinstance(work.max_concurrency, int):
        return 10 * work.max_concurrency  # not stated: enough rounds for a steady state
    raise NotSimulableError("num_prompts unknown and nothing measured says how many were sent")


def _mean_output(point: Point, done: int) -> float | None:
    """Output tokens per completed request: the totals, else output over request throughput
    (the same ratio: both are divided by the run's duration)."""
    m = point.measured
    if m.total_output_tokens:
        return m.total_output_tokens / done
    if m.output_throughput_tps and m.request_throughput_rps:
        return m.output_throughput_tps / m.request_throughput_rps
    return None


def _length(
    value: object, measured_mean: float | None, sharegpt: float, name: str, *, cap: bool
) -> LengthDist:
    if value == "sharegpt":
        return LengthDist("lognormal", measured_mean or sharegpt, 1.0)
    if isinstance(value, int):
        if cap and measured_mean is not None and measured_mean < value:
            return eos_lengths(value, measured_mean)
        return LengthDist("fixed", value)
    raise NotSimulableError(f"{name} unknown")


def eos_lengths(cap: int, mean: float) -> LengthDist:
    """Outputs that stop at EOS before `cap` on average: min(cap, exponential).

    A random prompt gives the model no reason to stop at one length rather than another, so the
    chance of EOS is the same at every token (exponential lengths), and the cap truncates them.
    The exponential's mean mu solves mu * (1 - exp(-cap / mu)) = mean, so the capped lengths
    average the measured mean. Varied lengths also matter for a closed loop: fixed ones keep
    its requests in lock step (they finish, and their successors prefill, together).
    """
    low, high = mean, mean
    while high * -math.expm1(-cap / high) < mean:
        high *= 2
    for _ in range(60):
        mid = (low + high) / 2
        if mid * -math.expm1(-cap / mid) < mean:
            low = mid
        else:
            high = mid
    return LengthDist("exponential", (low + high) / 2, cap=cap)


def engine_config(point: Point) -> EngineConfig:
    """The source's `vllm serve` flags as the twin reads them (`_DROPPED_FLAGS` left out)."""
    setup = point.setup
    tp = setup.tensor_parallel_size if isinstance(setup.tensor_parallel_size, int) else None
    if tp is None:
        raise NotSimulableError("tensor_parallel_size unknown")
    words = shlex.split(setup.server_args or "")
    kept: list[str] = []
    skip = 0
    for word in words:
        if skip:
            skip -= 1
        elif word in _DROPPED_FLAGS:
            skip = _DROPPED_FLAGS[word]
        else:
            kept.append(word)
    try:
        cfg = parse_vllm_argv([setup.model, *kept], {}).engine
    except ArgvError as exc:
        raise NotSimulableError(f"server_args: {exc}") from None
    return dataclasses.replace(cfg, tensor_parallel_size=tp)


def release_defaults(point: Point, cfg: EngineConfig, gpu: GpuProfile) -> EngineConfig:
    """`cfg` with the defaults the point's vLLM release and benchmark applied where the
    source's own flags leave them to vLLM; an unknown release keeps vLLM 0.33's."""
    setup, release = point.setup, _release(point.setup.vllm_version)
    own = {word.split("=", 1)[0] for word in shlex.split(setup.server_args or "")}
    old = release is not None and release < GPU_MEMORY_UTILIZATION_092_SINCE
    if old and not own & _UTILIZATION_FLAGS:
        cfg = dataclasses.replace(cfg, gpu_memory_utilization=OLD_GPU_MEMORY_UTILIZATION)
    tier = BUDGET_TIERS.get(setup.scheduler_budget or "") or batch_defaults(
        gpu.device_name, gpu.memory_gib
    )
    if tier is LARGE and release is not None and release < LARGE_TIER_SINCE:
        tier = MEDIUM
    if point.workload.mode != "serve":
        tier = OFFLINE_BATCH_DEFAULTS.get(tier, tier)
    if tier == batch_defaults(gpu.device_name, gpu.memory_gib):
        return cfg  # what the engine model resolves by itself
    return dataclasses.replace(
        cfg,
        max_num_batched_tokens=cfg.max_num_batched_tokens or tier.max_num_batched_tokens,
        max_num_seqs=cfg.max_num_seqs or tier.max_num_seqs,
    )


def _release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a release such as "0.11.0" or "0.10.1.1"; None when not a release."""
    found = re.fullmatch(r"(\d+)\.(\d+)(\.\d+)*", version.strip())
    return (int(found.group(1)), int(found.group(2))) if found else None


def _stat(stats: Stats | None) -> tuple[str, float] | None:
    if stats is None:
        return None
    if stats.median is not None:
        return "median", stats.median
    if stats.mean is not None:
        return "mean", stats.mean
    return None


def compare(point: Point, f: BenchServeFigures) -> tuple[Comparison, ...]:
    """Every measured quantity the simulation also produces, measured beside simulated."""
    m = point.measured
    offline_latency = point.workload.mode == "offline-latency"
    out: list[Comparison] = []
    for name, simulated in (
        ("ttft_ms", f.ttft_ms),
        ("tpot_ms", f.tpot_ms),
        ("itl_ms", f.itl_ms),
        ("e2el_ms", f.e2el_ms),
    ):
        picked = _stat(getattr(m, name))
        if picked is not None:
            stat, value = picked
            out.append(Comparison(f"{name}.{stat}", GROUPS[name], value, getattr(simulated, stat)))
    picked = _stat(m.latency_ms)
    if picked is not None:
        out.append(Comparison(f"latency_ms.{picked[0]}", "latency", picked[1], f.duration_s * 1000))
    # "unspecified" token throughput: output tokens/s for an offline batch (a decode speed),
    # total tokens/s for a server run (what benchmark_serving printed as token throughput)
    unspecified = f.output_throughput if offline_latency else f.total_token_throughput
    pairs: tuple[tuple[str, float | None, float], ...] = (
        ("request_throughput_rps", m.request_throughput_rps, f.request_throughput),
        ("output_throughput_tps", m.output_throughput_tps, f.output_throughput),
        ("total_throughput_tps", m.total_throughput_tps, f.total_token_throughput),
        ("token_throughput_unspecified_tps", m.token_throughput_unspecified_tps, unspecified),
    )
    for name, measured, sim in pairs:
        if measured is not None:
            out.append(Comparison(name, GROUPS[name], measured, sim))
    return tuple(
        c
        for c in out
        if not math.isnan(c.simulated) and c.quantity.split(".")[0] not in point.excluded
    )
