"""`vllm serve` argv as the twin parses it (docs/vllm-0.33.md §1.1-1.2)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from vllm_operator.sim.catalog import load_catalog
from vllm_operator.sim.engine import resolve_config
from vllm_operator.sim.engine.config import EngineConfig
from vllm_operator.vllm.numbers import human_readable_int
from vllm_twin.argv import (
    ArgvError,
    TwinArgs,
    choose_model_profile,
    format_argv_error,
    normalize_argv,
    parse_vllm_argv,
)
from vllm_twin.server.setup import build_engine

CATALOG = load_catalog(None)
DEFAULT_ENGINE = EngineConfig(
    max_num_seqs=None,
    max_num_active_seqs=None,
    max_num_batched_tokens=None,
    max_num_queued_reqs=None,
    max_num_queued_tokens=None,
    max_model_len=None,
    enable_chunked_prefill=None,
    enable_prefix_caching=None,
    served_model_name="Qwen/Qwen2.5-7B-Instruct",
)


def with_field(field: str, value: Any) -> EngineConfig:
    changes: dict[str, Any] = {field: value}
    return dataclasses.replace(DEFAULT_ENGINE, **changes)


def parse(*argv: str, env: dict[str, str] | None = None) -> TwinArgs:
    return parse_vllm_argv(list(argv), env or {})


def test_defaults_leave_every_engine_choice_to_vllm() -> None:
    args = parse("Qwen/Qwen2.5-7B-Instruct")
    assert args == TwinArgs(
        model="Qwen/Qwen2.5-7B-Instruct",
        served_model_names=("Qwen/Qwen2.5-7B-Instruct",),
        host=None,
        port=8000,
        engine=DEFAULT_ENGINE,
        disable_log_stats=False,
        stream_interval=1,
        gpu="H100-80GB",
        sim_model=None,
        time_scale=1.0,
        sim_profiles=None,
        sim_seed=0,
        unmodelled=(),
    )


# flag, value as written, EngineConfig field, parsed value
MAPPED = [
    ("--max-num-seqs", "64", "max_num_seqs", 64),
    ("--max-num-active-seqs", "8", "max_num_active_seqs", 8),
    ("--max-num-batched-tokens", "8k", "max_num_batched_tokens", 8000),
    ("--max-num-queued-reqs", "32", "max_num_queued_reqs", 32),
    ("--max-num-queued-tokens", "12K", "max_num_queued_tokens", 12288),
    ("--max-model-len", "32K", "max_model_len", 32768),
    ("--gpu-memory-utilization", "0.85", "gpu_memory_utilization", 0.85),
    ("--device-memory-utilization", "0.8", "gpu_memory_utilization", 0.8),
    ("--scheduling-policy", "priority", "scheduling_policy", "priority"),
    ("--long-prefill-token-threshold", "512", "long_prefill_token_threshold", 512),
    ("--tensor-parallel-size", "2", "tensor_parallel_size", 2),
    ("-tp", "4", "tensor_parallel_size", 4),
    ("--kv-cache-dtype", "fp8", "kv_cache_dtype", "fp8"),
    ("--block-size", "32", "block_size", 32),
    ("--watermark", "0.01", "watermark", 0.01),
    ("--performance-mode", "throughput", "performance_mode", "throughput"),
    ("--kv-cache-memory-bytes", "20G", "kv_cache_memory_bytes", 20 * 1024**3),
    ("--kv-cache-memory", "2g", "kv_cache_memory_bytes", 2 * 10**9),  # prefix, as argparse does
    ("--num-gpu-blocks-override", "1000", "num_gpu_blocks_override", 1000),
]


def _spellings() -> list[tuple[list[str], str, object]]:
    out: list[tuple[list[str], str, object]] = []
    for flag, text, field, value in MAPPED:
        out.append(([flag, text], field, value))
        out.append(([f"{flag}={text}"], field, value))
        if flag.startswith("--"):  # FlexibleArgumentParser: `_` for `-` in long names
            out.append(([f"--{flag[2:].replace('-', '_')}", text], field, value))
    return out


@pytest.mark.parametrize(("argv", "field", "value"), _spellings(), ids=lambda v: str(v))
def test_mapped_flags_in_every_spelling(argv: list[str], field: str, value: object) -> None:
    args = parse("Qwen/Qwen2.5-7B-Instruct", *argv)
    assert args.engine == with_field(field, value)


@pytest.mark.parametrize(
    ("argv", "field", "value"),
    [
        (["--enable-chunked-prefill"], "enable_chunked_prefill", True),
        (["--disable-chunked-prefill"], "enable_chunked_prefill", False),
        (["--no-enable-chunked-prefill"], "enable_chunked_prefill", False),
        (["--disable_chunked_prefill"], "enable_chunked_prefill", False),
        (["--enable-prefix-caching"], "enable_prefix_caching", True),
        (["--disable-prefix-caching"], "enable_prefix_caching", False),
        (["--no-enable-prefix-caching"], "enable_prefix_caching", False),
        (["--async-scheduling"], "async_scheduling", True),
        (["--no-async-scheduling"], "async_scheduling", False),
        (["--no-scheduler-reserve-full-isl"], "scheduler_reserve_full_isl", False),
        (["--scheduler-reserve-full-isl"], "scheduler_reserve_full_isl", True),
        # like BooleanOptionalAction: the last one given wins
        (
            ["--enable-chunked-prefill", "--disable-chunked-prefill"],
            "enable_chunked_prefill",
            False,
        ),
        (["--disable-prefix-caching", "--enable-prefix-caching"], "enable_prefix_caching", True),
    ],
)
def test_boolean_pairs(argv: list[str], field: str, value: bool) -> None:
    args = parse("Qwen/Qwen2.5-7B-Instruct", *argv)
    assert args.engine == with_field(field, value)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2048", 2048),
        ("8k", 8000),
        ("8K", 8192),
        ("1.5k", 1500),
        ("2m", 2_000_000),
        ("2M", 2 * 1024**2),
        ("1g", 10**9),
        ("1G", 1024**3),
        ("1t", 10**12),
        ("1T", 1024**4),
    ],
)
def test_human_readable_ints(text: str, value: int) -> None:
    assert human_readable_int(text) == value


@pytest.mark.parametrize("text", ["1.5K", "8kb", "k", "eight", "1e3"])
def test_human_readable_int_refusals(text: str) -> None:
    with pytest.raises(ArgvError, match="max-num-batched-tokens"):
        parse("m", "--max-num-batched-tokens", text)


@pytest.mark.parametrize(("text", "value"), [("auto", -1), ("AUTO", -1), ("-1", -1), ("4k", 4000)])
def test_max_model_len_auto(text: str, value: int) -> None:
    assert parse("m", "--max-model-len", text).engine.max_model_len == value


def test_max_model_len_below_minus_one_parses_as_vllm_and_is_refused_at_start() -> None:
    # vLLM's human_readable_int_or_auto takes -2; its config refuses it at start-up
    engine = parse("m", "--max-model-len=-2").engine
    assert engine.max_model_len == -2
    with pytest.raises(ValueError, match="max_model_len"):
        resolve_config(engine, CATALOG.gpu("H100-80GB"), CATALOG.model("Qwen2.5-7B"))


def test_model_is_the_positional_or_the_flag_moved_in_front_of_it() -> None:
    """FlexibleArgumentParser moves `--model X` to the front as the positional, so a positional
    given as well is left over: vLLM's parser refuses it (the parity tier's argv fuzz found it)."""
    assert parse("--model", "a/b").model == "a/b"
    assert parse("--max-num-seqs", "4", "--model=a/b").model == "a/b"
    with pytest.raises(ArgvError, match="unrecognized arguments: x/y"):
        parse("x/y", "--model", "a/b")
    assert parse().model == "Qwen/Qwen3-0.6B"
    assert parse("--max-num-seqs", "4", "x/y").model == "x/y"


def test_served_model_names_name_the_metrics_and_the_engine() -> None:
    args = parse("Qwen/Qwen2.5-7B-Instruct", "--served-model-name", "chat", "chat-2")
    assert args.served_model_names == ("chat", "chat-2")
    assert args.model_name == "chat"
    assert args.engine.served_model_name == "chat"


def test_server_flags() -> None:
    args = parse("m", "--host", "0.0.0.0", "--port=9000", "--disable-log-stats")
    assert (args.host, args.port, args.disable_log_stats) == ("0.0.0.0", 9000, True)
    assert parse("m", "--stream-interval", "4").stream_interval == 4
    with pytest.raises(ArgvError, match="stream-interval"):
        parse("m", "--stream-interval", "0")
    # vLLM's default 0 aborts in-flight requests on SIGTERM (docs/rollouts.md §1.1)
    assert parse("m").shutdown_timeout == 0
    assert parse("m", "--shutdown_timeout=60").shutdown_timeout == 60


IGNORED = [
    ["--trust-remote-code"],
    ["--enforce-eager"],
    ["--download-dir", "/models"],
    ["--tokenizer", "x/y"],
    ["--seed", "7"],
    ["--api-key", "secret"],
    ["--hf-token", "hf_x"],
    ["--uvicorn-log-level", "warning"],
    ["-O3"],
    ["-O", "0"],
    ["--optimization-level", "1"],
    ["--pipeline-parallel-size", "1"],
    ["-dp", "1"],
]


def test_dtype_is_vllms_choice_and_reaches_the_engine() -> None:
    # vLLM 0.33's ModelDType choices; what it runs in is resolved at start-up (vllm/dtypes.py)
    assert parse("m", "--dtype", "half").engine.dtype == "half"
    assert parse("m").engine.dtype == "auto"
    with pytest.raises(ArgvError, match=r"argument --dtype: invalid choice: 'fp16'"):
        parse("m", "--dtype", "fp16")


@pytest.mark.parametrize("argv", IGNORED, ids=lambda a: a[0])
def test_accepted_flags_that_change_nothing_modelled(argv: list[str]) -> None:
    args = parse("Qwen/Qwen2.5-7B-Instruct", *argv)
    assert args.engine == DEFAULT_ENGINE
    assert args.unmodelled == ()


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--max-num-scheduled-tokens", "4k"], "--max-num-scheduled-tokens"),
        (["--prefill-schedule-interval", "2"], "--prefill-schedule-interval"),
        (["--long-prefill-token-threshold-adaptive"], "--long-prefill-token-threshold-adaptive"),
        (["-pp", "2"], "--pipeline-parallel-size"),
        (["--data-parallel-size", "2"], "--data-parallel-size"),
        (["-asc", "2"], "--api-server-count"),
    ],
)
def test_accepted_flags_whose_effect_is_not_modelled_are_reported(
    argv: list[str], flag: str
) -> None:
    assert parse("m", *argv).unmodelled == (flag,)


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--disable-log-requests"], "--enable-log-requests"),  # one option, two spellings
        (["--max-logprobs", "5"], "--max-logprobs"),
        (["--cudagraph-capture-sizes", "1", "2", "4"], "--cudagraph-capture-sizes"),
        (["--compilation-config.mode=3"], "--compilation-config"),
        (["--middleware", "a", "--middleware", "b"], "--middleware"),
    ],
)
def test_other_vllm_options_are_accepted_and_reported_unmodelled(
    argv: list[str], flag: str
) -> None:
    args = parse("m", *argv)
    assert args.engine == with_field("served_model_name", "m")
    assert args.unmodelled == (flag,)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--enable-batching"], "unrecognized arguments: --enable-batching"),
        (["m", "--max-batch-size", "8"], "unrecognized arguments: --max-batch-size 8"),
        (["--config", "flags.yaml"], "argument --config: the twin does not read vLLM config"),
        (["--max-logprobs", "five"], "argument --max-logprobs: invalid int value: 'five'"),
        (["--max-waiting-queue-length", "3"], "unrecognized arguments"),
        (["--scheduling-policy", "lifo"], "invalid choice: 'lifo'"),
        (["--max-num-seqs", "many"], "invalid int value: 'many'"),
        (["a", "b"], "unrecognized arguments: b"),
    ],
)
def test_refusals_carry_argparse_messages(argv: list[str], message: str) -> None:
    with pytest.raises(ArgvError, match=message):
        parse(*argv)


def test_refusal_text_is_argparse_usage_then_error_line() -> None:
    text = format_argv_error("unrecognized arguments: --enable-batching")
    assert text.startswith("usage: vllm serve [model_tag] [options]\n")
    assert text.endswith("vllm serve: error: unrecognized arguments: --enable-batching\n")


def test_twin_extras_come_from_flags_or_the_environment() -> None:
    env = {
        "VLLM_TWIN_GPU": "H200",
        "VLLM_TWIN_SIM_MODEL": "Llama-3.1-8B",
        "VLLM_TWIN_TIME_SCALE": "20",
        "VLLM_TWIN_SIM_PROFILES": "/p.yaml",
        "VLLM_TWIN_SIM_SEED": "5",
    }
    args = parse("m", env=env)
    assert (args.gpu, args.sim_model, args.time_scale, args.sim_profiles, args.sim_seed) == (
        "H200",
        "Llama-3.1-8B",
        20.0,
        "/p.yaml",
        5,
    )
    args = parse("m", "--gpu", "A100-80GB", "--time-scale=2", "--sim_seed", "9", env=env)
    assert (args.gpu, args.time_scale, args.sim_seed, args.sim_model) == (
        "A100-80GB",
        2.0,
        9,
        "Llama-3.1-8B",
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"VLLM_TWIN_TIME_SCALE": "fast"}, "VLLM_TWIN_TIME_SCALE"),
        ({"VLLM_TWIN_TIME_SCALE": "0"}, "must be > 0"),
        ({"VLLM_TWIN_TIME_SCALE": "inf"}, "must be a finite number"),
        ({"VLLM_TWIN_TIME_SCALE": "1e400"}, "must be a finite number"),
        ({"VLLM_TWIN_TIME_SCALE": "1e5"}, "must be at most 10000"),
        ({"VLLM_TWIN_SIM_SEED": "x"}, "VLLM_TWIN_SIM_SEED"),
    ],
)
def test_bad_environment_values_are_refused(env: dict[str, str], message: str) -> None:
    with pytest.raises(ArgvError, match=message):
        parse("m", env=env)


def test_time_scale_flag_must_be_positive() -> None:
    with pytest.raises(ArgvError, match="time-scale"):
        parse("m", "--time-scale", "-1")


def test_normalize_touches_only_long_flag_names() -> None:
    assert normalize_argv(["--max_num_seqs=a_b", "my_model", "-O3", "--", "--x_y"]) == [
        "--max-num-seqs=a_b",
        "my_model",
        "--optimization-level",
        "3",
        "--",
        "--x-y",
    ]


KNOWN = {
    "Qwen2.5-7B": "Qwen2.5-7B",
    "Qwen/Qwen2.5-7B-Instruct": "Qwen2.5-7B",
    "Llama-3.1-8B": "Llama-3.1-8B",
    "meta-llama/Llama-3.1-8B-Instruct": "Llama-3.1-8B",
    "Qwen3-0.6B": "Qwen3-0.6B",
}


@pytest.mark.parametrize(
    ("model", "sim_model", "profile"),
    [
        ("Qwen/Qwen2.5-7B-Instruct", None, "Qwen2.5-7B"),
        ("meta-llama/Llama-3.1-8B-Instruct", None, "Llama-3.1-8B"),
        ("Qwen2.5-7B", None, "Qwen2.5-7B"),
        ("Qwen/Qwen3-0.6B", None, "Qwen3-0.6B"),  # by the tag's last part
        ("someone/llama-3.1-8b-chat", None, "Llama-3.1-8B"),
        ("my-org/finetune", "Llama-3.1-8B", "Llama-3.1-8B"),
    ],
)
def test_choose_model_profile(model: str, sim_model: str | None, profile: str) -> None:
    assert choose_model_profile(model, sim_model, KNOWN) == profile


def test_choose_model_profile_names_the_way_out() -> None:
    with pytest.raises(ValueError, match="--sim-model or set VLLM_TWIN_SIM_MODEL"):
        choose_model_profile("my-org/finetune", None, KNOWN)
    with pytest.raises(ValueError, match="unknown --sim-model"):
        choose_model_profile("x", "GPT-5", KNOWN)


def test_time_scale_flag_must_be_finite() -> None:
    with pytest.raises(ArgvError, match="time-scale: must be a finite number"):
        parse("m", "--time-scale", "inf")


@pytest.mark.parametrize(
    ("value", "allowed"), [("1", True), (" True ", True), ("0", False), ("yes", False)]
)
def test_a_long_max_model_len_starts_where_vllms_env_allows_it(value: str, allowed: bool) -> None:
    """vLLM refuses --max-model-len past the model's context unless VLLM_ALLOW_LONG_MAX_MODEL_LEN
    is 1 or true (vllm/envs.py); the twin reads the same variable the same way."""
    args = parse_vllm_argv(
        ["Qwen/Qwen2.5-0.5B-Instruct", "--max-model-len", "65536"],
        {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": value},
    )
    if allowed:
        build_engine(args)
        return
    with pytest.raises(ValueError, match="VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"):
        build_engine(args)


def test_fail_on_environ_validation_stops_on_a_variable_vllm_does_not_define() -> None:
    """Platform.validate_environ with hard_fail; the twin's own variables are its command line."""
    with pytest.raises(ArgvError, match="Unknown vLLM environment variable detected: VLLM_FOO"):
        parse("m", "--fail-on-environ-validation", env={"VLLM_FOO": "1"})
    env = {"VLLM_FOO": "1", "VLLM_CACHE_ROOT": "/c"}
    assert parse("m", env=env).model == "m"  # without the flag vLLM only logs it
    twin_env = {"VLLM_TWIN_GPU": "L4", "VLLM_CACHE_ROOT": "/c"}
    assert parse("m", "--fail-on-environ-validation", env=twin_env).gpu == "L4"
