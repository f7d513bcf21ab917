"""Ask vLLM 0.33.0 itself whether it accepts a `vllm serve` argv, and what it makes of it.

Runs under the reference venv's python (e2e/vllm-ref-venv.sh), never under the project venv:

    echo '[{"argv": ["Qwen/Qwen3-8B", "--max-num-seqs", "64"], "device": "h100",
            "model_max_len": 32768}]' | $VLLM_REF_PYTHON tests/parity/vllm_probe.py

stdin: a JSON list of cases. Each case has
  argv           what follows `vllm serve` in the pod: [MODEL, "--flag", "value", ...]
  device         a device class below ("h100", ...) or {"name", "memory_gib", "capability"}:
                 the GPU that the hardware-dependent defaults are computed for
  model_max_len  the context length vLLM would derive from the model's HF config; needed
                 only when argv has no --max-model-len (the probe never downloads a model)
(Other modes: --options, --values, --resolve; --dtypes: stdin a list of {"cache", "model"}
dtype names; stdout vLLM's KV-cache and model dtype lists and VllmConfig's KV-dtype check's
error, or null, for each; --requests: stdin a list of {"chat": bool, "body": {...}}; stdout
whether vLLM's request model for it accepts each body, and its first error line;
--request-fields: the field names of vLLM's completion and chat request models; --environ:
stdin a list of {"env": {NAME: value}, "hard_fail": bool}; stdout Platform.validate_environ's
message, or null, for each.)
stdout: {"vllm": <version>, "results": [...]} with one result per case, in order:
  {"accepted": bool, "stage": null | "parse" | "validate" | "config", "error": str | null,
   "parsed": {"cli": {...}, "scheduler": {...}, "cache": {...}}}
  stage says which step refused: argparse ("parse"), `vllm serve`'s own argument checks
  ("validate"), or the SchedulerConfig / CacheConfig constructors ("config").

Each step is vLLM's own code, called the way `vllm serve` calls it:
  parse     vllm/entrypoints/cli/main.py builds FlexibleArgumentParser("vLLM CLI") with a
            `serve` subparser from ServeSubcommand.subparser_init (make_arg_parser), parses
            ["serve", *argv] and runs ServeSubcommand.validate; ServeSubcommand.cmd then copies
            model_tag into model, and run_server builds AsyncEngineArgs.from_cli_args(args).
  defaults  EngineArgs.create_engine_config fills chunked prefill / prefix caching from the
            model, then max_num_seqs / max_num_batched_tokens from the device and usage context
            (OPENAI_API_SERVER for `vllm serve`). The probe calls the same two EngineArgs
            methods, with `model_facts` standing in for ModelConfig (a plain decoder-only text
            model) and a platform that reports the case's device.
  config    SchedulerConfig(...) and CacheConfig(...) with the keyword arguments that
            create_engine_config passes; the model-derived ones come from `model_facts`.
            check_construction_matches_vllm() proves from vLLM's source that the keyword sets
            agree, so a vLLM upgrade that adds one fails the probe instead of passing silently.

Anything that is not a refusal by vLLM (a bug here, an import problem) ends the probe with a
traceback and exit status 2: a broken probe must never look like a refused argv.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import inspect
import io
import json
import os
import sys
import textwrap
from dataclasses import dataclass
from typing import Any

# vLLM's logger writes to stdout; stdout is reserved for the JSON answer.
_ANSWER = sys.stdout
sys.stdout = sys.stderr

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ["HF_HUB_OFFLINE"] = "0"  # 1 would make EngineArgs resolve the model to a local path
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

GIB = 1 << 30

# GPUs as torch reports them; get_batch_defaults only looks at the memory tier (>= 160 GiB,
# >= 70 GiB), "a100" in the name, and compute capability 12.1 (GB10).
DEVICE_CLASSES: dict[str, dict[str, Any]] = {
    "h100": {"name": "NVIDIA H100 80GB HBM3", "memory_gib": 80, "capability": [9, 0]},
    "h200": {"name": "NVIDIA H200", "memory_gib": 141, "capability": [9, 0]},
    "b200": {"name": "NVIDIA B200", "memory_gib": 180, "capability": [10, 0]},
    "a100-80gb": {"name": "NVIDIA A100-SXM4-80GB", "memory_gib": 80, "capability": [8, 0]},
    "a100-40gb": {"name": "NVIDIA A100-SXM4-40GB", "memory_gib": 40, "capability": [8, 0]},
    "l40s": {"name": "NVIDIA L40S", "memory_gib": 48, "capability": [8, 9]},
    "l4": {"name": "NVIDIA L4", "memory_gib": 24, "capability": [8, 9]},
    "gb10": {"name": "NVIDIA GB10", "memory_gib": 120, "capability": [12, 1]},
}


class ProbeError(Exception):
    """The probe itself cannot answer this case (as opposed to vLLM refusing it)."""


# ---- platform: must be installed before anything imports vllm.platforms.current_platform ----

import vllm.platforms  # noqa: E402
from pydantic import ValidationError  # noqa: E402
from vllm.platforms.interface import DeviceCapability, Platform, PlatformEnum  # noqa: E402


class ProbeCudaPlatform(Platform):
    """A CUDA platform that reports the device of the case being probed.

    vLLM's own CudaPlatform cannot be imported without the NVIDIA driver (libcuda.so.1); the
    scheduler defaults only ask the platform for memory, name and capability, which this
    answers from the case. vLLM's CLI swaps current_platform the same way for `vllm bench`.
    """

    _enum = PlatformEnum.CUDA
    device_name = "cuda"
    device_type = "cuda"
    dispatch_key = "CUDA"
    device: dict[str, Any] = DEVICE_CLASSES["h100"]

    @classmethod
    def get_device_capability(cls, device_id: int = 0) -> DeviceCapability | None:
        capability = cls.device.get("capability")
        if capability is None:  # unknown: vLLM's is_device_capability() is then False
            return None
        major, minor = capability
        return DeviceCapability(major=major, minor=minor)

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return str(cls.device["name"])

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return int(float(cls.device["memory_gib"]) * GIB)


vllm.platforms.current_platform = ProbeCudaPlatform()

import vllm  # noqa: E402
from vllm.config import CacheConfig, SchedulerConfig  # noqa: E402
from vllm.engine.arg_utils import AsyncEngineArgs, EngineArgs  # noqa: E402
from vllm.entrypoints.cli.serve import ServeSubcommand  # noqa: E402
from vllm.exceptions import VLLMValidationError  # noqa: E402
from vllm.usage.usage_lib import UsageContext  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402
from vllm.utils.torch_utils import resolve_kv_cache_dtype_string  # noqa: E402


@dataclass
class ModelFacts:
    """The ModelConfig attributes the scheduler part of create_engine_config reads.

    A decoder-only text generation model (Llama, Qwen, Mistral, ...): vLLM enables chunked
    prefill and prefix caching for it by default (ModelConfig.is_chunked_prefill_supported /
    is_prefix_caching_supported), and it is neither multimodal nor encoder-decoder.
    """

    model: str
    max_model_len: int
    runner_type: str = "generate"
    is_chunked_prefill_supported: bool = True
    is_prefix_caching_supported: bool = True
    is_multimodal_model: bool = False
    is_mm_prefix_lm: bool = False
    is_encoder_decoder: bool = False
    is_attention_free: bool = False
    hf_config: Any = None  # no quantization_config: kv_cache_dtype "auto" stays "auto"


@dataclass
class ParallelFacts:
    use_batched_dp_moe: bool = False  # only MoE models with batched data parallel


def scheduler_kwargs(ea: EngineArgs, model: ModelFacts) -> dict[str, Any]:
    """SchedulerConfig's arguments as EngineArgs.create_engine_config passes them."""
    return {
        "runner_type": model.runner_type,
        "max_num_batched_tokens": ea.max_num_batched_tokens,
        "max_num_scheduled_tokens": ea.max_num_scheduled_tokens,
        "max_num_seqs": ea.max_num_seqs,
        "max_num_active_seqs": ea.max_num_active_seqs,
        "max_num_queued_reqs": ea.max_num_queued_reqs,
        "max_num_queued_tokens": ea.max_num_queued_tokens,
        "max_model_len": model.max_model_len,
        "enable_chunked_prefill": ea.enable_chunked_prefill,
        "disable_chunked_mm_input": ea.disable_chunked_mm_input,
        "is_multimodal_model": model.is_multimodal_model,
        "is_encoder_decoder": model.is_encoder_decoder,
        "policy": ea.scheduling_policy,
        "scheduler_cls": ea.scheduler_cls,
        "long_prefill_token_threshold": ea.long_prefill_token_threshold,
        "long_prefill_token_threshold_adaptive": ea.long_prefill_token_threshold_adaptive,
        "scheduler_reserve_full_isl": ea.scheduler_reserve_full_isl,
        "watermark": ea.watermark,
        "prefill_schedule_interval": ea.prefill_schedule_interval,
        "disable_hybrid_kv_cache_manager": ea.disable_hybrid_kv_cache_manager,
        "async_scheduling": ea.async_scheduling,
        "stream_interval": ea.stream_interval,
    }


def cache_kwargs(ea: EngineArgs, model: ModelFacts) -> dict[str, Any]:
    """CacheConfig's arguments that the rendered flags can reach, as create_engine_config
    passes them. The rest (mamba, offloading, ...) keep CacheConfig's defaults, which equal
    EngineArgs' defaults for a plain model."""
    return {
        "block_size": ea.block_size,
        "gpu_memory_utilization": ea.gpu_memory_utilization,
        "kv_cache_memory_bytes": ea.kv_cache_memory_bytes,
        "cache_dtype": resolve_kv_cache_dtype_string(ea.kv_cache_dtype, model),
        "is_attention_free": model.is_attention_free,
        "num_gpu_blocks_override": ea.num_gpu_blocks_override,
        "sliding_window": None,  # full attention
        "enable_prefix_caching": ea.enable_prefix_caching,
        "prefix_caching_hash_algo": ea.prefix_caching_hash_algo,
    }


def _call_keywords(func: Any, callee: str) -> set[str]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == callee
    ]
    if len(calls) != 1:
        raise ProbeError(
            f"expected one {callee}(...) call in {func.__qualname__}, found {len(calls)}"
        )
    return {kw.arg for kw in calls[0].keywords if kw.arg is not None}


def check_construction_matches_vllm() -> None:
    """The probe builds both configs with the keywords vLLM's create_engine_config uses, and
    vLLM's argument code sees the probe's platform (not one resolved before it was installed)."""
    import vllm.engine.arg_utils as arg_utils

    if not isinstance(arg_utils.current_platform, ProbeCudaPlatform):
        raise ProbeError(f"arg_utils uses {arg_utils.current_platform!r}, not the probe's")
    model = ModelFacts(model="m", max_model_len=1)
    ea = EngineArgs()
    ours = set(scheduler_kwargs(ea, model))
    theirs = _call_keywords(EngineArgs.create_engine_config, "SchedulerConfig")
    if ours != theirs:
        raise ProbeError(
            "SchedulerConfig keywords differ from EngineArgs.create_engine_config: "
            f"missing {sorted(theirs - ours)}, extra {sorted(ours - theirs)}"
        )
    ours = set(cache_kwargs(ea, model))
    theirs = _call_keywords(EngineArgs.create_engine_config, "CacheConfig")
    if not ours <= theirs:
        raise ProbeError(f"CacheConfig keywords vLLM does not pass: {sorted(ours - theirs)}")


def build_serve_parser() -> tuple[argparse.ArgumentParser, ServeSubcommand]:
    """The top-level `vllm` parser with the `serve` subcommand, as vllm/entrypoints/cli/main.py
    builds it (the other subcommands cannot change how `serve` parses)."""
    parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    serve = ServeSubcommand()
    serve.subparser_init(subparsers).set_defaults(dispatch_function=serve.cmd)
    return parser, serve


CLI_FIELDS = (
    "model",
    "served_model_name",
    "port",
    "max_num_seqs",
    "max_num_active_seqs",
    "max_num_batched_tokens",
    "max_num_queued_reqs",
    "max_num_queued_tokens",
    "max_model_len",
    "enable_chunked_prefill",
    "enable_prefix_caching",
    "scheduling_policy",
    "long_prefill_token_threshold",
    "gpu_memory_utilization",
    "kv_cache_dtype",
    "dtype",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "disable_log_stats",
)
SCHEDULER_FIELDS = (
    "max_num_seqs",
    "max_num_active_seqs",
    "max_num_batched_tokens",
    "max_num_scheduled_tokens",
    "max_num_queued_reqs",
    "max_num_queued_tokens",
    "enable_chunked_prefill",
    "policy",
    "long_prefill_token_threshold",
)
CACHE_FIELDS = ("gpu_memory_utilization", "cache_dtype", "enable_prefix_caching", "block_size")


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value)


def _pick(obj: Any, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: _jsonable(getattr(obj, name)) for name in names}


def _device(spec: Any) -> dict[str, Any]:
    if isinstance(spec, str):
        if spec not in DEVICE_CLASSES:
            raise ProbeError(f"unknown device class {spec!r}; known: {sorted(DEVICE_CLASSES)}")
        return DEVICE_CLASSES[spec]
    if isinstance(spec, dict) and {"name", "memory_gib"} <= spec.keys():
        return spec
    raise ProbeError(f"device must be a class name or {{name, memory_gib[, capability]}}: {spec!r}")


def _message(exc: ValueError) -> str:
    """A pydantic ValidationError as `Model: msg; msg`, without its input dump and URL."""
    if isinstance(exc, ValidationError):
        return f"{exc.title}: " + "; ".join(str(err["msg"]) for err in exc.errors())
    return str(exc)


def _parser_error(text: str) -> str:
    """argparse's error from its stderr on one line: from `...: error:` on (a config object's
    pydantic error spans lines, and names the field that refused), the usage dropped."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if ": error: " in line), len(lines) - 1)
    return " ".join(lines[start:]) or "argparse exited"


def _refused(stage: str, error: str, parsed: dict[str, Any]) -> dict[str, Any]:
    return {"accepted": False, "stage": stage, "error": error, "parsed": parsed}


def probe(case: dict[str, Any]) -> dict[str, Any]:
    argv = case["argv"]
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise ProbeError(f"argv must be a list of strings: {argv!r}")
    ProbeCudaPlatform.device = _device(case.get("device", "h100"))
    parsed: dict[str, Any] = {}

    parser, serve = build_serve_parser()
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            args = parser.parse_args(["serve", *argv])
    except SystemExit:
        return _refused("parse", _parser_error(stderr.getvalue()), parsed)
    except ValueError as exc:  # FlexibleArgumentParser's own argv checks
        return _refused("parse", str(exc), parsed)
    except IndexError as exc:  # its dotted-argument pass reads past the end: `vllm serve` dies
        return _refused("parse", f"IndexError: {exc}", parsed)
    except (KeyError, TypeError, AttributeError) as exc:
        # a config's validator that crashes on a value (CompilationConfig's cudagraph_mode
        # looks the text up in its enum): `vllm serve` dies with the traceback
        return _refused("parse", f"crash: {type(exc).__name__}: {exc}", parsed)
    try:
        serve.validate(args)
    except (ValueError, TypeError, KeyError, VLLMValidationError) as exc:
        return _refused("validate", str(exc), parsed)

    # ServeSubcommand.cmd: "If model is specified in CLI (as positional arg), it takes precedence"
    if args.model_tag is not None:
        args.model = args.model_tag
    parsed["cli"] = _pick(args, CLI_FIELDS)
    engine_args = AsyncEngineArgs.from_cli_args(args)

    max_model_len = engine_args.max_model_len
    if max_model_len is None:
        if not isinstance(case.get("model_max_len"), int):
            raise ProbeError("no --max-model-len in argv: the case must give model_max_len")
        max_model_len = case["model_max_len"]
    elif max_model_len < 1:
        raise ProbeError("--max-model-len auto/-1 is resolved from KV memory at engine start")
    model = ModelFacts(model=engine_args.model, max_model_len=max_model_len)

    try:
        engine_args._set_default_chunked_prefill_and_prefix_caching_args(model)  # type: ignore[arg-type]
        engine_args._set_default_max_num_seqs_and_batched_tokens_args(
            UsageContext.OPENAI_API_SERVER,
            model,  # type: ignore[arg-type]
            ParallelFacts(),  # type: ignore[arg-type]
        )
        scheduler = SchedulerConfig(**scheduler_kwargs(engine_args, model))
        parsed["scheduler"] = _pick(scheduler, SCHEDULER_FIELDS)
        cache = CacheConfig(**cache_kwargs(engine_args, model))
        parsed["cache"] = _pick(cache, CACHE_FIELDS)
    except ValueError as exc:  # includes pydantic.ValidationError
        return _refused("config", _message(exc), parsed)
    return {"accepted": True, "stage": None, "error": None, "parsed": parsed}


# ---- the option list and token resolution (vllm_operator/vllm/options.json, options.py) ----


@functools.cache
def _serve_parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """(the top-level `vllm` parser, its `serve` subparser); parsing leaves both unchanged."""
    parser, _ = build_serve_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, subparsers.choices["serve"]


def dump_options() -> dict[str, Any]:
    """Every optional action of `vllm serve`, as options.json records it."""
    _, serve = _serve_parser()
    options = []
    for action in serve._actions:
        # the parser's own map, which also holds spellings hidden from help (--no-enable-*)
        strings = [s for s, a in serve._option_string_actions.items() if a is action]
        if not strings:
            continue
        options.append(
            {
                "strings": strings,
                "dest": action.dest,
                "action": type(action).__name__,
                "default": _jsonable(action.default),
                "choices": None if action.choices is None else [str(c) for c in action.choices],
                "nargs": action.nargs,
                "type": getattr(action.type, "__name__", None if action.type is None else "?"),
                # --lora-modules: its action reads each item (LoRAParserAction)
                "value": "lora_module"
                if type(action).__name__ == "LoRAParserAction"
                else _value_type(action.type),
            }
        )
        config = _config_class(action.type)
        if config is not None:
            options[-1]["fields"] = _config_fields(config)
    options.sort(key=lambda o: o["dest"])
    import vllm.envs as envs

    # what Platform.validate_environ checks a VLLM_* variable against (unknown: a warning, or
    # an exit with --fail-on-environ-validation)
    environment = sorted(envs.environment_variables)
    return {"vllm": vllm.__version__, "environment": environment, "options": options}


def _dataclass_keys(cls: Any) -> list[str]:
    """The keys a config dataclass takes from JSON (its init fields, or their aliases); vLLM's
    forbid any other (`extra="forbid"`), which the probe checks."""
    fields = getattr(cls, "__pydantic_fields__", {})
    keys = sorted(
        str(info.validation_alias or info.alias or field)
        for field, info in fields.items()
        if info.init is not False and info.init_var is not True
    )
    if getattr(cls, "__pydantic_config__", {}).get("extra") != "forbid":
        raise ProbeError(f"{cls.__name__} takes keys other than its fields: record that")
    return keys


# pydantic-core schema types whose validation is data alone (no function, no Python class):
# vllm_operator.vllm.value_types rebuilds them with pydantic-core's SchemaValidator
_PLAIN_SCHEMAS = {
    "any", "bool", "dict", "float", "frozenset", "int", "list", "literal", "none", "nullable",
    "set", "str", "tuple", "union",
}  # fmt: skip
_NOT_VALIDATION = {"serialization", "metadata", "ref"}


class _NotPlainError(Exception):
    """A schema node with a validator function, a class or another Python object."""


def _config_class(convert: Any) -> Any:
    """The config dataclass an option's `type` validates its JSON into, or None."""
    name = getattr(convert, "__name__", "")
    if name == "_optional_type":
        cells = dict(zip(convert.__code__.co_freevars, convert.__closure__ or (), strict=True))
        return _config_class(cells["return_type"].cell_contents)
    return convert.__defaults__[0] if name == "parse_dataclass" else None


def _config_fields(cls: Any) -> dict[str, Any]:
    """For each key of the config (as _dataclass_keys), the pydantic-core schema its value is
    validated with, where that is data alone (types, literals, bounds); None where a validator
    function, an enum or a nested class decides (not reproduced by the operator)."""
    args = _find_schema(cls.__pydantic_core_schema__, "dataclass-args")
    if args is None or cls.__pydantic_config__.get("strict"):
        raise ProbeError(f"{cls.__name__}: no dataclass-args schema, or a strict config")
    fields: dict[str, Any] = {}
    for field in args["fields"]:
        if field.get("init") is False or field.get("init_only"):
            continue
        key = field.get("validation_alias") or field["name"]
        try:
            fields[key] = _plain_schema(field["schema"])
        except _NotPlainError:
            fields[key] = None
    if sorted(fields) != _dataclass_keys(cls):
        raise ProbeError(f"{cls.__name__}: its schema's fields are not its keys")
    return fields


def _find_schema(node: Any, kind: str) -> Any:
    if isinstance(node, dict):
        if node.get("type") == kind:
            return node
        node = list(node.values())
    if isinstance(node, list):
        return next((f for f in (_find_schema(v, kind) for v in node) if f is not None), None)
    return None


def _plain_schema(node: Any) -> Any:
    if isinstance(node, dict) and node.get("type") == "default":
        return _plain_schema(node["schema"])  # the default is vLLM's; the value is checked
    if isinstance(node, dict) and "type" in node and node["type"] not in _PLAIN_SCHEMAS:
        raise _NotPlainError(node["type"])
    if isinstance(node, dict):
        return {k: _plain_schema(v) for k, v in node.items() if k not in _NOT_VALIDATION}
    if isinstance(node, list | tuple):
        return [_plain_schema(v) for v in node]
    if node is None or isinstance(node, bool | int | float | str):
        return node
    raise _NotPlainError(type(node).__name__)


def _value_type(convert: Any) -> str | None:
    """What an option's `type` does to a value, as vllm_operator.vllm.value_types reads it:
    the callable's name, with what optional_type and parse_type wrap in parentheses
    ("optional(int)", "parse(loads)"), "dataclass:KEY,..." for parse_dataclass (JSON validated
    into one of vLLM's config dataclasses, which take only those keys), and "lower_snake" for
    the lambdas that lower-case a backend's name and turn `-` into `_` before its choices are
    checked."""
    if convert is None:
        return None
    name = getattr(convert, "__name__", "?")
    if name in ("_optional_type", "_parse_type"):
        cells = dict(zip(convert.__code__.co_freevars, convert.__closure__ or (), strict=True))
        inner = _value_type(cells["return_type"].cell_contents)
        return f"{name.strip('_').removesuffix('_type')}({inner})"
    if name == "parse_dataclass":
        return "dataclass:" + ",".join(_dataclass_keys(convert.__defaults__[0]))
    if name == "<lambda>":
        return "lower_snake" if convert("A-B") == "a_b" else "lambda"
    return name


class _CapturedError(Exception):
    """Stops FlexibleArgumentParser right after its own rewrites."""


def _preprocessed(parser: argparse.ArgumentParser, args: list[str]) -> list[str]:
    """What FlexibleArgumentParser.parse_args hands to argparse for `args`."""
    captured: list[str] = []
    original = argparse.ArgumentParser.parse_args

    def capture(self: Any, args: Any = None, namespace: Any = None) -> Any:
        captured.extend(args)
        raise _CapturedError

    argparse.ArgumentParser.parse_args = capture  # type: ignore[method-assign]
    try:
        parser.parse_args(args)
    except _CapturedError:
        pass
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]
    return captured


def resolve(token: str) -> dict[str, Any]:
    """What vLLM's parser makes of `token` after the model: an option, a value, an ambiguous
    prefix or an unknown flag (argparse's _parse_optional on the preprocessed token)."""
    parser, serve = _serve_parser()
    processed = _preprocessed(parser, ["serve", "MODEL", token, "VALUE"])
    if processed[1] != "MODEL":  # `--model X` is moved in front as the model tag
        return {"kind": "option", "option": "--model", "dest": "model"}
    flags = [a for a in processed[2:] if a.startswith("-")]
    if not flags or flags[0] == "--":  # `--` makes what follows positional
        return {"kind": "value"}
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            found = serve._parse_optional(flags[0])
    except SystemExit:
        return {"kind": "ambiguous", "error": stderr.getvalue().strip().splitlines()[-1]}
    if found is None:
        return {"kind": "value"}
    action, option_string = (found[0] if isinstance(found, list) else found)[:2]
    if action is None:
        return {"kind": "unknown"}
    return {"kind": "option", "option": option_string, "dest": action.dest}


def parse_value(dest: str, value: str) -> dict[str, Any]:
    """vLLM's own `type` and `choices` for the action `dest`, applied to one value."""
    _, serve = _serve_parser()
    action = next(a for a in serve._actions if a.dest == dest)
    try:
        return {"ok": True, "value": _jsonable(serve._get_values(action, [value]))}
    except argparse.ArgumentError as exc:
        return {"ok": False, "error": str(exc)}


def dtype_rules(cases: list[dict[str, str]]) -> dict[str, Any]:
    """vLLM's dtype lists, and what VllmConfig's KV-dtype check says to each (cache, model)."""
    import types
    import typing

    import torch
    from vllm.config.cache import KV_CACHE_DTYPES
    from vllm.config.model import ModelDType
    from vllm.config.vllm import VllmConfig

    results = []
    for case in cases:
        config = types.SimpleNamespace(
            cache_config=types.SimpleNamespace(cache_dtype=case["cache"]),
            model_config=types.SimpleNamespace(dtype=getattr(torch, case["model"])),
        )
        try:
            VllmConfig._reject_mismatched_float_kv_cache(config)  # type: ignore[arg-type]
            results.append({"error": None})
        except ValueError as exc:
            results.append({"error": str(exc)})
    return {
        "vllm": vllm.__version__,
        "kv_cache_dtypes": list(KV_CACHE_DTYPES),
        "model_dtypes": list(typing.get_args(ModelDType)),
        "results": results,
    }


def environ_verdicts(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Platform.validate_environ(hard_fail) with each case's `env` as the VLLM_* variables
    (the probe's own are set aside for the call): None, or the message vLLM stops with."""
    from vllm.platforms import current_platform

    results = []
    for case in cases:
        saved = {k: v for k, v in os.environ.items() if k.startswith("VLLM_")}
        for name in saved:
            del os.environ[name]
        os.environ.update(case["env"])
        try:
            current_platform.validate_environ(case["hard_fail"])
            results.append(None)
        except ValueError as exc:
            results.append(str(exc))
        finally:
            for name in case["env"]:
                os.environ.pop(name, None)
            os.environ.update(saved)
    return {"vllm": vllm.__version__, "results": results}


def env_flags(cases: list[dict[str, str]]) -> dict[str, Any]:
    """What vllm.envs reads each case's `name` as when the environment holds `value`."""
    import os

    import vllm.envs as envs

    results = []
    for case in cases:
        os.environ[case["name"]] = case["value"]
        results.append(getattr(envs, case["name"]))
        del os.environ[case["name"]]
    return {"vllm": vllm.__version__, "results": results}


def request_fields() -> dict[str, Any]:
    """The fields of vLLM's completion and chat request models, by name."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest

    return {
        "vllm": vllm.__version__,
        "chat": sorted(ChatCompletionRequest.model_fields),
        "completion": sorted(CompletionRequest.model_fields),
    }


def _accepted(**refusal: dict[str, Any] | None) -> dict[str, Any]:
    """A body the request model accepts, and the stage after it that refused it, if one did."""
    stages = {"render": None, "sampling": None, "prompt": None}
    return {"accepted": True, "error": None, **stages, **refusal}


def _client_error(exc: Exception) -> dict[str, Any]:
    """The message and param vLLM's error response gives the client for `exc`."""
    from vllm.entrypoints.serve.exception_handling.error_response import create_error_response

    error = create_error_response(exc).error
    return {"message": error.message, "param": error.param}


def _text_prompt(request: Any) -> bool:
    prompt = getattr(request, "prompt", None)
    return isinstance(prompt, str) or (
        isinstance(prompt, list) and bool(prompt) and isinstance(prompt[0], str)
    )


def _rendered_length(tok_params: Any, length: int, *, text: bool) -> int:
    """A prompt of `length` tokens after the renderer: text is tokenised up to the encode
    limit (`get_encode_kwargs`), then truncation and the length check (`_validate_tokens`)."""
    if text:
        limit = tok_params.get_encode_kwargs()
        if limit.get("truncation") and limit.get("max_length") is not None:
            length = min(length, limit["max_length"])
    return len(tok_params._validate_tokens(None, list(range(length))))


def _embeds_of(request: Any) -> list[Any]:
    """A completion's prompt_embeds as the renderer takes them: one, or a list."""
    embeds = getattr(request, "prompt_embeds", None)
    if embeds is None:
        return []
    return embeds if isinstance(embeds, list) else [embeds]


def request_verdicts(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """What vLLM's request models (completions, chat) say to each body: accepted, or why not;
    and for an accepted one, what the renderer says (`build_tok_params`: max_tokens and
    truncate_prompt_tokens against the context; prompt embeddings, which a server without
    `--enable-prompt-embeds` refuses; each of `prompt_lens` truncated and checked as tokens),
    then what its SamplingParams say, built as the serving layer builds
    them (`get_max_tokens` with the case's `max_model_len` and the first rendered length,
    then `to_sampling_params` with no generation-config defaults): the message the client reads;
    then, where they pass, what the input processor's length check says to each prompt length
    as the prompts go in (`InputProcessor._validate_prompt_len`, run on a stand-in
    that holds only what it reads: a text-only generating model of `max_model_len`)."""
    from types import SimpleNamespace

    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest
    from vllm.entrypoints.serve.utils.api_utils import get_max_tokens
    from vllm.renderers.embed_utils import safe_load_prompt_embeds
    from vllm.v1.engine.input_processor import InputProcessor

    results = []
    for case in cases:
        config = SimpleNamespace(max_model_len=case["max_model_len"], runner_type="generate")
        processor = SimpleNamespace(
            skip_prompt_length_check=False, supports_mm_inputs=False, model_config=config
        )
        model = ChatCompletionRequest if case["chat"] else CompletionRequest
        try:
            request = model.model_validate(case["body"])
        except (ValueError, VLLMValidationError) as exc:  # pydantic's, and vLLM's validators
            results.append({"accepted": False, "error": str(exc).splitlines()[0]})
            continue
        except (TypeError, AttributeError, KeyError) as exc:
            # a validator of vLLM's that assumed the body's types: its server answers 500
            error = f"{type(exc).__name__}: {exc}"
            results.append({"accepted": False, "error": error, "crash": True})
            continue
        try:  # the renderer: its limits, each prompt's embeddings, then its tokens
            tok_params = request.build_tok_params(config)
            for embeds in _embeds_of(request):
                safe_load_prompt_embeds(SimpleNamespace(enable_prompt_embeds=False), embeds)
            lengths = [
                _rendered_length(tok_params, n, text=case["chat"] or _text_prompt(request))
                for n in case["prompt_lens"]
            ]
        except VLLMValidationError as exc:
            results.append(_accepted(render=_client_error(exc)))
            continue
        requested = getattr(request, "max_completion_tokens", None)
        requested = request.max_tokens if requested is None else requested
        sampling = prompt = None
        try:
            first = lengths[0]
            max_tokens = get_max_tokens(case["max_model_len"], requested, first, {})
            request.to_sampling_params(max_tokens, {})
        except (ValueError, TypeError, VLLMValidationError) as exc:
            sampling = _client_error(exc)
        try:
            for length in lengths if sampling is None else ():
                InputProcessor._validate_prompt_len(processor, length, "decoder")
        except VLLMValidationError as exc:
            prompt = _client_error(exc)
        results.append(_accepted(sampling=sampling, prompt=prompt))
    return {"vllm": vllm.__version__, "results": results}


def main() -> int:
    if sys.argv[1:] == ["--requests"]:
        json.dump(request_verdicts(json.load(sys.stdin)), _ANSWER)
        _ANSWER.write("\n")
        return 0
    if sys.argv[1:] == ["--request-fields"]:
        json.dump(request_fields(), _ANSWER)
        _ANSWER.write("\n")
        return 0
    if sys.argv[1:] == ["--environ"]:
        json.dump(environ_verdicts(json.load(sys.stdin)), _ANSWER)
        _ANSWER.write("\n")
        return 0
    if sys.argv[1:] == ["--env-flags"]:
        json.dump(env_flags(json.load(sys.stdin)), _ANSWER)
        _ANSWER.write("\n")
        return 0
    if sys.argv[1:] == ["--dtypes"]:
        json.dump(dtype_rules(json.load(sys.stdin)), _ANSWER)
        _ANSWER.write("\n")
        return 0
    if sys.argv[1:] == ["--values"]:
        cases = json.load(sys.stdin)
        results = [parse_value(c["dest"], c["value"]) for c in cases]
        json.dump({"vllm": vllm.__version__, "results": results}, _ANSWER)
        _ANSWER.write("\n")
        return 0
    if sys.argv[1:] == ["--options"]:
        json.dump(dump_options(), _ANSWER, indent=1, sort_keys=True)
        _ANSWER.write("\n")
        return 0
    if sys.argv[1:] == ["--resolve"]:
        tokens = json.load(sys.stdin)
        json.dump({"vllm": vllm.__version__, "results": [resolve(t) for t in tokens]}, _ANSWER)
        _ANSWER.write("\n")
        return 0
    cases = json.load(sys.stdin)
    if not isinstance(cases, list):
        raise ProbeError("stdin must be a JSON list of cases")
    check_construction_matches_vllm()
    results = [probe(case) for case in cases]
    json.dump({"vllm": vllm.__version__, "results": results}, _ANSWER, indent=1)
    _ANSWER.write("\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # the probe is broken, not the argv: say so loudly
        import traceback

        traceback.print_exc()
        sys.exit(2)
