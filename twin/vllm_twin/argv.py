"""The twin's command line: the argv of `vllm serve` (0.33.0), plus a few twin-only extras.

The e2e harness starts a twin with exactly a pod's container args, so this parser accepts what
vLLM accepts for the flags the operator can render, in vLLM's spellings (docs/vllm-0.33.md §1):
- the model is positional (`vllm serve MODEL ...`) or `--model`, which vLLM moves to the front
  as the positional (so both at once is an unrecognized argument);
- every flag, spelling, value syntax and default comes from vLLM's facts
  (vllm_operator.vllm.flags); `--flag value`, `--flag=value`, `_` for `-` and unique prefixes
  resolve as vLLM resolves them (vllm_operator.vllm.options);
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
import dataclasses
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from vllm_operator.sim.engine.config import EngineConfig
from vllm_operator.vllm import flags as vf
from vllm_operator.vllm.env import ALLOW_LONG_MAX_MODEL_LEN, env_flag
from vllm_operator.vllm.flags import PARSERS, Kind, VllmFlag
from vllm_operator.vllm.options import Option, load_option_table, negates, resolve_token
from vllm_operator.vllm.rewrite import DottedArgError, rewrite_argv
from vllm_operator.vllm.serve_checks import serve_problem
from vllm_operator.vllm.values import checked_parser, value_parser
from vllm_twin.server.auth import resolve_api_keys

ENGINE_FIELDS = frozenset(f.name for f in dataclasses.fields(EngineConfig))
_TABLE = load_option_table()  # every option of vLLM 0.33's `vllm serve` (options.json)

PROG = "vllm serve"
DEFAULT_MODEL = "Qwen/Qwen3-0.6B"  # vllm/config/model.py:155
DEFAULT_GPU = "H100-80GB"


class ArgvError(Exception):
    """A command line vLLM would refuse; `str()` is argparse's message (no prefix)."""


class _Parser(argparse.ArgumentParser):
    # raise instead of printing and exiting, so callers (and tests) decide what to do
    def error(self, message: str) -> NoReturn:
        raise ArgvError(message)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


MAX_TIME_SCALE = 1e4


def time_scale(text: str) -> float:
    # beyond this, the virtual clock outruns the wall clock's resolution and metrics turn to NaN
    value = positive_float(text)
    if value > MAX_TIME_SCALE:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_TIME_SCALE:g}, got {text!r}")
    return value


def add_vllm_flag(p: argparse.ArgumentParser | argparse._ArgumentGroup, flag: VllmFlag) -> None:
    """One `vllm serve` flag as vLLM 0.33 parses it: its spellings, value syntax and default."""
    names, dest, kind = (flag.flag, *flag.aliases), flag.dest, flag.kind
    if kind is Kind.BOOL:
        # not mutually exclusive: like BooleanOptionalAction, the last one given wins
        p.add_argument(*names, dest=dest, action="store_const", const=True, default=flag.default)
        p.add_argument(*flag.negatives, dest=dest, action="store_const", const=False)
    elif kind is Kind.STORE_TRUE:
        p.add_argument(*names, dest=dest, action="store_true")
    elif kind is Kind.CHOICE:
        p.add_argument(*names, dest=dest, choices=flag.choices, default=flag.default)
    elif kind is Kind.NAMES:
        p.add_argument(*names, dest=dest, nargs="+")
    elif kind is Kind.OPTIONAL_STR:
        p.add_argument(*names, dest=dest, nargs="?", const=True)
    elif kind is Kind.STR:
        p.add_argument(*names, dest=dest, default=flag.default)
    else:
        # vLLM's optional types also take "" and "None" (vllm_operator.vllm.values)
        parse = value_parser(_TABLE.by_string[flag.flag]) or PARSERS[kind]
        p.add_argument(*names, dest=dest, type=parse, default=flag.default)


# EngineConfig's fields that come from a flag of the same dest (the served name comes apart)
ENGINE_FLAGS: tuple[VllmFlag, ...] = tuple(
    f for f in vf.FLAGS if f.dest in ENGINE_FIELDS and f.dest != "served_model_name"
)
_SERVER_FLAGS: tuple[VllmFlag, ...] = (
    vf.MODEL,
    vf.SERVED_MODEL_NAME,
    vf.HOST,
    vf.PORT,
    vf.DISABLE_LOG_STATS,
    vf.STREAM_INTERVAL,
    vf.API_KEY,
    vf.SHUTDOWN_TIMEOUT,
)
# Accepted because vLLM 0.33 accepts them, but they change nothing the twin models. Those whose
# effect the twin cannot reproduce are reported at startup (see `_UNMODELLED`).
_IGNORED_FLAGS: tuple[VllmFlag, ...] = tuple(
    f for f in vf.FLAGS if f not in ENGINE_FLAGS and f not in _SERVER_FLAGS
)


# Every other option of vLLM 0.33's `vllm serve` (options.json): accepted with vLLM's arity,
# choices and int/float types, its effect not modelled (reported at start-up, like _UNMODELLED).
# --config is refused: it reads more flags from a file, which the twin would silently ignore.
_KNOWN_DESTS = frozenset(f.dest for f in vf.FLAGS) | {"help", "model_tag"}
_REFUSED_OPTIONS = frozenset({"config"})


def _no_config_file(text: str) -> str:
    raise argparse.ArgumentTypeError(
        "the twin does not read vLLM config files; give their flags on the command line"
    )


_BY_DEST = {o.dest: o for o in _TABLE.options}
OTHER_OPTIONS: tuple[Option, ...] = tuple(
    o for o in _TABLE.options if o.dest not in _KNOWN_DESTS and o.dest not in _REFUSED_OPTIONS
)


def _add_other(p: argparse.ArgumentParser, option: Option) -> None:
    dest, names = f"other_{option.dest}", option.strings
    if option.nargs == 0:
        # vLLM's boolean pairs: --x / --no-x, and --enable-x / --disable-x
        off = tuple(n for n in names if negates(n, option.dest))
        on = tuple(n for n in names if n not in off)
        p.add_argument(*on, dest=dest, action="store_const", const=True, default=None)
        if off:
            p.add_argument(*off, dest=dest, action="store_const", const=False, default=None)
        return
    action = "append" if option.action == "_AppendAction" else "store"
    kwargs: dict[str, Any] = {"dest": dest, "action": action, "default": None}
    if option.nargs is not None:
        kwargs["nargs"] = option.nargs
    parse = checked_parser(option)  # the choices are checked on the converted value there
    if parse is not None:
        kwargs["type"] = parse
    p.add_argument(*names, **kwargs)


def add_engine_flags(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The flags that map onto EngineConfig; `vllm-twin simulate` takes the same ones."""
    for flag in ENGINE_FLAGS:
        add_vllm_flag(p, flag)


def engine_config_from(ns: argparse.Namespace, **extra: Any) -> EngineConfig:
    """EngineConfig from parsed engine flags; an omitted flag keeps EngineConfig's default."""
    values = {f.dest: getattr(ns, f.dest) for f in ENGINE_FLAGS}
    return EngineConfig(**{k: v for k, v in values.items() if v is not None}, **extra)


# dest → value that changes nothing: a given value other than this is not modelled
_UNMODELLED: Mapping[str, object] = {
    f.dest: f.default
    for f in (
        vf.MAX_NUM_SCHEDULED_TOKENS,
        vf.PREFILL_SCHEDULE_INTERVAL,
        vf.LONG_PREFILL_TOKEN_THRESHOLD_ADAPTIVE,
        vf.PIPELINE_PARALLEL_SIZE,
        vf.DATA_PARALLEL_SIZE,
        vf.API_SERVER_COUNT,
    )
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
    _Extra("--time-scale", "VLLM_TWIN_TIME_SCALE", time_scale, 1.0, "virtual s per wall s"),
    _Extra("--sim-profiles", "VLLM_TWIN_SIM_PROFILES", str, None, "profiles YAML override"),
    _Extra("--sim-seed", "VLLM_TWIN_SIM_SEED", int, 0, "simulator seed"),
)


def build_parser() -> argparse.ArgumentParser:
    # prefixes are resolved against vLLM's whole option list (normalize_argv), not the twin's
    p = _Parser(prog=PROG, usage=f"{PROG} [model_tag] [options]", add_help=True, allow_abbrev=False)
    p.add_argument("model_tag", nargs="?", help="model to serve (overrides --model)")
    for flag in (*_SERVER_FLAGS, *ENGINE_FLAGS, *_IGNORED_FLAGS):
        add_vllm_flag(p, flag)
    for option in OTHER_OPTIONS:
        _add_other(p, option)
    p.add_argument("--config", type=_no_config_file)
    twin = p.add_argument_group("twin only (also from the environment)")
    for extra in TWIN_EXTRAS:
        # default None here: the environment fills in what the command line leaves out
        twin.add_argument(extra.flag, type=extra.type, help=f"{extra.help} (${extra.env})")
    return p


def normalize_argv(argv: Sequence[str]) -> list[str]:
    """Each flag in the spelling vLLM resolves it to: `--max_num_seq=4` → `--max-num-seqs=4`.

    vLLM 0.33 rewrites `_` to `-` in long names, `-O3` to `--optimization-level 3` and dotted
    options to JSON (vllm_operator.vllm.rewrite), then argparse takes any unique prefix of its
    options (vllm_operator.vllm.options); the twin's extras are matched exactly first, since
    `--gpu` is a prefix of vLLM's own flags.
    """
    extras = {extra.flag for extra in TWIN_EXTRAS}
    try:
        argv = list(rewrite_argv(_model_first(argv)).tokens)
    except DottedArgError as exc:
        raise ArgvError(str(exc)) from None
    out: list[str] = []
    positional_only = False
    for arg in argv:
        name, eq, value = arg.partition("=")
        positional_only = positional_only or arg == "--"
        if positional_only or name in extras or not arg.startswith("--"):
            out.append(arg)
            continue
        resolution = resolve_token(arg)
        if resolution.ambiguous:
            raise ArgvError(
                f"ambiguous option: {name} could match {', '.join(resolution.ambiguous)}"
            )
        out.append((resolution.option or name) + eq + value)
    return out


def _model_first(argv: Sequence[str]) -> list[str]:
    """FlexibleArgumentParser moves the first `--model X` (or `--model=X`) to the front as the
    positional model (vllm/utils/argparse_utils.py), so a positional given as well is then an
    unrecognized argument."""
    at = next((i for i, arg in enumerate(argv) if re.match(r"^--model(=.+|$)", arg)), None)
    if at is None:
        return list(argv)
    if argv[at] == "--model":
        if at + 1 >= len(argv):
            raise ArgvError("argument --model: expected one argument")
        return [argv[at + 1], *argv[:at], *argv[at + 2 :]]
    return [argv[at].removeprefix("--model="), *argv[:at], *argv[at + 1 :]]


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
    api_keys: tuple[str, ...] = ()  # --api-key, else VLLM_API_KEY: /v1 needs one of them
    shutdown_timeout: int = 0  # --shutdown-timeout: seconds to drain on SIGTERM, 0 aborts

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


def _parsed(ns: argparse.Namespace, dest: str) -> Any:
    """What vLLM's namespace would hold at `dest`: the twin's own flag, else the value given
    for an option it does not model, else vLLM's default (options.json)."""
    if hasattr(ns, dest):
        return getattr(ns, dest)
    given = getattr(ns, f"other_{dest}", None)
    if given is not None:
        return given
    option = _BY_DEST.get(dest)
    return None if option is None else option.default


def parse_vllm_argv(argv: Sequence[str], env: Mapping[str, str]) -> TwinArgs:
    """Parse `vllm serve` argv; raises ArgvError like argparse would exit 2 (SystemExit on -h)."""
    ns = build_parser().parse_args(normalize_argv(argv))
    model = ns.model_tag or ns.model or DEFAULT_MODEL
    names = tuple(ns.served_model_name or (model,))
    if ns.stream_interval < 1:
        raise ArgvError(f"argument --stream-interval: must be >= 1, got {ns.stream_interval}")
    unmodelled = tuple(
        vf.BY_DEST[dest].flag
        for dest, neutral in _UNMODELLED.items()
        if getattr(ns, dest) != neutral
    ) + tuple(o.strings[0] for o in OTHER_OPTIONS if getattr(ns, f"other_{o.dest}") is not None)
    # the twin's own variables (TWIN_EXTRAS) stand for the command line a twin gets, not for
    # anything in a real pod's environment
    own = {extra.env for extra in TWIN_EXTRAS}
    pod_env = {name: value for name, value in env.items() if name not in own}
    problem = serve_problem(lambda dest: _parsed(ns, dest), pod_env, local_files=True)
    if problem is not None:
        raise ArgvError(problem)
    extras = _extras_from(ns, env)
    return TwinArgs(
        model=model,
        served_model_names=names,
        host=ns.host,
        port=ns.port,
        engine=engine_config_from(
            ns,
            served_model_name=names[0],
            allow_long_max_model_len=env_flag(env.get(ALLOW_LONG_MAX_MODEL_LEN)),
        ),
        disable_log_stats=ns.disable_log_stats,
        stream_interval=ns.stream_interval,
        unmodelled=unmodelled,
        api_keys=resolve_api_keys(ns.api_key, env),
        shutdown_timeout=ns.shutdown_timeout,
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
