"""The twin's command line: the argv of `vllm serve` (0.33.0), plus a few twin-only extras.

The e2e harness starts a twin with exactly a pod's container args, so this parser accepts what
vLLM accepts for the flags the operator can render, in vLLM's spellings (docs/vllm-0.33.md §1):
- the model is positional (`vllm serve MODEL ...`) or `--model`; the positional wins;
- `--flag value` and `--flag=value`; `_` and `-` are interchangeable in long flag names, as in
  vLLM's FlexibleArgumentParser;
- booleans come in pairs (`--enable-chunked-prefill`/`--disable-chunked-prefill`, ...);
- token counts take human-readable suffixes (`8k` = 8000, `8K` = 8192);
- anything unknown is refused the argparse way (`vllm serve: error: unrecognized arguments:
  ...`, exit code 2).

Twin-only extras (`--gpu`, `--sim-model`, `--time-scale`, `--sim-profiles`, `--sim-seed`) can also
come from the environment (`VLLM_TWIN_GPU`, ...), because the pod's args are vLLM's and must stay
valid for vLLM. The command line wins over the environment.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from vllm_operator.api.budgets import BUDGET_FIELDS
from vllm_operator.sim.engine.config import EngineConfig

PROG = "vllm serve"
DEFAULT_MODEL = "Qwen/Qwen3-0.6B"  # vllm/config/model.py:155
DEFAULT_GPU = "H100-80GB"


class ArgvError(Exception):
    """A command line vLLM would refuse; `str()` is argparse's message (no prefix)."""


class _Parser(argparse.ArgumentParser):
    # raise instead of printing and exiting, so callers (and tests) decide what to do
    def error(self, message: str) -> NoReturn:
        raise ArgvError(message)


_DECIMAL: Mapping[str, int] = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY: Mapping[str, int] = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_readable_int(text: str) -> int:
    """vLLM's integer syntax: `8k` = 8000 (decimal, lower case), `8K` = 8192 (binary, upper case).

    Decimal suffixes take a fractional number (`1.5k` = 1500); binary ones do not, as in vLLM.
    """
    match = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)([kmgtKMGT]?)\s*", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"invalid human-readable integer: {text!r}")
    number, suffix = match.groups()
    if not suffix:
        try:
            return int(number)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid integer: {text!r}") from None
    if suffix.islower():
        return int(float(number) * _DECIMAL[suffix])
    if "." in number:
        raise argparse.ArgumentTypeError(
            f"decimals are not allowed with binary suffix {suffix}; did you mean "
            f"{number}{suffix.lower()}?"
        )
    return int(number) * _BINARY[suffix]


def max_model_len_arg(text: str) -> int:
    """`--max-model-len`: a human-readable int, or `auto`/`-1` (largest that fits in KV memory)."""
    if text.strip().lower() == "auto":
        return -1
    value = human_readable_int(text)
    if value < -1:
        raise argparse.ArgumentTypeError(f"max_model_len must be >= -1 or 'auto', got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def _bool_pair(
    p: argparse.ArgumentParser,
    dest: str,
    positive: str,
    negatives: Sequence[str],
    default: bool | None,
    help: str,
) -> None:
    # not mutually exclusive: like BooleanOptionalAction, the last one given wins
    p.add_argument(positive, dest=dest, action="store_const", const=True, help=help)
    p.add_argument(*negatives, dest=dest, action="store_const", const=False)
    p.set_defaults(**{dest: default})


def _add_engine_flags(p: argparse.ArgumentParser) -> None:
    """Flags that map to EngineConfig: the twin models them."""
    for budget in BUDGET_FIELDS:  # the operator's budget table names them and their parsing
        p.add_argument(budget.flag, type=human_readable_int if budget.human_readable else int)
    p.add_argument("--max-model-len", type=max_model_len_arg)
    p.add_argument(
        "--gpu-memory-utilization", "--device-memory-utilization", type=float, default=0.92
    )
    p.add_argument("--scheduling-policy", choices=("fcfs", "priority"), default="fcfs")
    p.add_argument("--long-prefill-token-threshold", type=int, default=0)
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--kv-cache-dtype", default="auto")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--watermark", type=float, default=0.0)
    p.add_argument("--kv-cache-memory-bytes", type=human_readable_int)
    p.add_argument("--num-gpu-blocks-override", type=int)
    p.add_argument(
        "--performance-mode",
        choices=("balanced", "interactivity", "throughput"),
        default="balanced",
    )
    # §1.2 spells the negatives --disable-*; --no-enable-* is what BooleanOptionalAction (§1.1)
    # generates for the same fields, so both are accepted
    _bool_pair(
        p,
        "enable_chunked_prefill",
        "--enable-chunked-prefill",
        ("--disable-chunked-prefill", "--no-enable-chunked-prefill"),
        None,
        "chunked prefill (default on)",
    )
    _bool_pair(
        p,
        "enable_prefix_caching",
        "--enable-prefix-caching",
        ("--disable-prefix-caching", "--no-enable-prefix-caching"),
        None,
        "automatic prefix caching (default on)",
    )
    _bool_pair(
        p, "async_scheduling", "--async-scheduling", ("--no-async-scheduling",), None, "async"
    )
    _bool_pair(
        p,
        "scheduler_reserve_full_isl",
        "--scheduler-reserve-full-isl",
        ("--no-scheduler-reserve-full-isl",),
        True,
        "admit only if the full input fits in KV",
    )


# Accepted because vLLM 0.33 accepts them, but they change nothing the twin models. Those whose
# effect the twin cannot reproduce are reported at startup (see `unmodelled_flags`).
def _add_ignored_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype")
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--download-dir")
    p.add_argument("--tokenizer")
    p.add_argument("--seed", type=int)
    p.add_argument("--api-key")
    p.add_argument("--hf-token", nargs="?", const=True)
    p.add_argument(
        "--uvicorn-log-level", choices=("critical", "error", "warning", "info", "debug", "trace")
    )
    p.add_argument("--optimization-level", "-O", type=int, choices=(0, 1, 2, 3))
    p.add_argument("--max-num-scheduled-tokens", type=human_readable_int)
    p.add_argument("--prefill-schedule-interval", type=int, default=1)
    _bool_pair(
        p,
        "long_prefill_token_threshold_adaptive",
        "--long-prefill-token-threshold-adaptive",
        ("--no-long-prefill-token-threshold-adaptive",),
        False,
        "not modelled",
    )
    p.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    p.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    p.add_argument("--api-server-count", "-asc", type=int)


# dest → (flag, value that changes nothing): a given value other than this is not modelled
_UNMODELLED: Mapping[str, tuple[str, object]] = {
    "max_num_scheduled_tokens": ("--max-num-scheduled-tokens", None),
    "prefill_schedule_interval": ("--prefill-schedule-interval", 1),
    "long_prefill_token_threshold_adaptive": ("--long-prefill-token-threshold-adaptive", False),
    "pipeline_parallel_size": ("--pipeline-parallel-size", 1),
    "data_parallel_size": ("--data-parallel-size", 1),
    "api_server_count": ("--api-server-count", None),
}


@dataclass(frozen=True)
class _Extra:
    flag: str
    env: str
    type: Callable[[str], Any]
    default: object
    help: str


TWIN_EXTRAS: tuple[_Extra, ...] = (
    _Extra("--gpu", "VLLM_TWIN_GPU", str, DEFAULT_GPU, "GPU profile name"),
    _Extra("--sim-model", "VLLM_TWIN_SIM_MODEL", str, None, "model profile name"),
    _Extra("--time-scale", "VLLM_TWIN_TIME_SCALE", positive_float, 1.0, "virtual s per wall s"),
    _Extra("--sim-profiles", "VLLM_TWIN_SIM_PROFILES", str, None, "profiles YAML override"),
    _Extra("--sim-seed", "VLLM_TWIN_SIM_SEED", int, 0, "simulator seed"),
)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, usage=f"{PROG} [model_tag] [options]", add_help=True)
    p.add_argument("model_tag", nargs="?", help="model to serve (overrides --model)")
    p.add_argument("--model")
    p.add_argument("--served-model-name", nargs="+")
    p.add_argument("--host")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--disable-log-stats", action="store_true")
    p.add_argument("--stream-interval", type=int, default=1)
    _add_engine_flags(p)
    _add_ignored_flags(p)
    twin = p.add_argument_group("twin only (also from the environment)")
    for extra in TWIN_EXTRAS:
        # default None here: the environment fills in what the command line leaves out
        twin.add_argument(extra.flag, type=extra.type, help=f"{extra.help} (${extra.env})")
    return p


def normalize_argv(argv: Sequence[str]) -> list[str]:
    """`--max_num_seqs=4` → `--max-num-seqs=4`: underscores in long flag names become dashes."""
    out = []
    for arg in argv:
        if arg.startswith("--") and len(arg) > 2:
            name, eq, value = arg.partition("=")
            arg = name.replace("_", "-") + eq + value
        out.append(arg)
    return out


@dataclass(frozen=True)
class TwinArgs:
    model: str  # the served model tag (positional or --model)
    served_model_names: tuple[str, ...]  # first = the model_name label
    host: str | None
    port: int
    engine: EngineConfig
    disable_log_stats: bool
    stream_interval: int
    gpu: str
    sim_model: str | None
    time_scale: float
    sim_profiles: str | None
    sim_seed: int
    unmodelled: tuple[str, ...]  # flags given with an effect the twin does not reproduce

    @property
    def model_name(self) -> str:
        return self.served_model_names[0]


def _extras_from(ns: argparse.Namespace, env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for extra in TWIN_EXTRAS:
        dest = extra.flag.lstrip("-").replace("-", "_")
        value = getattr(ns, dest)
        if value is None and extra.env in env:
            try:
                value = extra.type(env[extra.env])
            except (argparse.ArgumentTypeError, ValueError) as exc:
                raise ArgvError(f"environment variable {extra.env}: {exc}") from None
        values[dest] = extra.default if value is None else value
    return values


def _engine_config(ns: argparse.Namespace, served_name: str) -> EngineConfig:
    return EngineConfig(
        **{budget.dest: getattr(ns, budget.dest) for budget in BUDGET_FIELDS},
        max_model_len=ns.max_model_len,
        enable_chunked_prefill=ns.enable_chunked_prefill,
        enable_prefix_caching=ns.enable_prefix_caching,
        scheduling_policy=ns.scheduling_policy,
        gpu_memory_utilization=ns.gpu_memory_utilization,
        long_prefill_token_threshold=ns.long_prefill_token_threshold,
        async_scheduling=ns.async_scheduling,
        tensor_parallel_size=ns.tensor_parallel_size,
        kv_cache_dtype=ns.kv_cache_dtype,
        block_size=ns.block_size,
        watermark=ns.watermark,
        scheduler_reserve_full_isl=ns.scheduler_reserve_full_isl,
        performance_mode=ns.performance_mode,
        served_model_name=served_name,
        kv_cache_memory_bytes=ns.kv_cache_memory_bytes,
        num_gpu_blocks_override=ns.num_gpu_blocks_override,
    )


def parse_vllm_argv(argv: Sequence[str], env: Mapping[str, str]) -> TwinArgs:
    """Parse `vllm serve` argv; raises ArgvError like argparse would exit 2 (SystemExit on -h)."""
    ns = build_parser().parse_args(normalize_argv(argv))
    model = ns.model_tag or ns.model or DEFAULT_MODEL
    names = tuple(ns.served_model_name or (model,))
    if ns.stream_interval < 1:
        raise ArgvError(f"argument --stream-interval: must be >= 1, got {ns.stream_interval}")
    unmodelled = tuple(
        flag for dest, (flag, neutral) in _UNMODELLED.items() if getattr(ns, dest) != neutral
    )
    extras = _extras_from(ns, env)
    return TwinArgs(
        model=model,
        served_model_names=names,
        host=ns.host,
        port=ns.port,
        engine=_engine_config(ns, names[0]),
        disable_log_stats=ns.disable_log_stats,
        stream_interval=ns.stream_interval,
        unmodelled=unmodelled,
        **extras,
    )


def format_argv_error(message: str) -> str:
    """What argparse prints before exiting 2: the usage line, then `prog: error: message`."""
    return f"{build_parser().format_usage()}{PROG}: error: {message}\n"


def _stem(name: str) -> str:
    base = name.rsplit("/", 1)[-1].lower()
    for suffix in ("-instruct", "-chat", "-it"):
        base = base.removesuffix(suffix)
    return base


def choose_model_profile(model: str, sim_model: str | None, names: Mapping[str, str]) -> str:
    """The simulator model profile for a served model tag; ValueError names the way out.

    `names` maps every profile name and every HF alias the profiles declare to a profile name.
    Failing those, the tag's last path part matches a profile name, ignoring case and an
    `-Instruct`/`-Chat` suffix (`Qwen/Qwen3-0.6B` → `Qwen3-0.6B`).
    """
    profiles = sorted(set(names.values()))
    if sim_model is not None:
        if sim_model not in names:
            raise ValueError(f"unknown --sim-model {sim_model!r}; known: {', '.join(profiles)}")
        return names[sim_model]
    if model in names:
        return names[model]
    by_stem = {_stem(p): p for p in profiles}
    if (hit := by_stem.get(_stem(model))) is not None:
        return hit
    raise ValueError(
        f"no simulator profile for model {model!r}; pass --sim-model or set VLLM_TWIN_SIM_MODEL "
        f"(known: {', '.join(profiles)})"
    )
