"""The `vllm serve` flags the operator renders or the engine model and the twin understand.

One row per flag: its canonical spelling, vLLM's dest (the EngineArgs / CLI attribute), how its
value is parsed, its other spellings (short aliases, deprecated aliases, BooleanOptionalAction's
negatives) and vLLM 0.33.0's default as the parser reports it (None: resolved later, or unset).
The renderer writes these spellings, the API refuses them in extraArgs, the twin's `vllm serve`
parser is built from them; tests/unit checks each row against vLLM's committed option list
(options.json) and the parity tier checks that list and the value parsers against vLLM itself.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from vllm_operator.vllm.dtypes import MODEL_DTYPES
from vllm_operator.vllm.numbers import (
    FlagValueError,
    human_readable_int,
    human_readable_int_or_auto,
)


class Kind(enum.Enum):
    """How vLLM's parser reads the flag's value (the argparse action and type it uses)."""

    INT = "int"
    HUMAN_INT = "human_int"  # 8k = 8000, 8K = 8192
    HUMAN_INT_OR_AUTO = "human_int_or_auto"  # also `auto` / -1
    FLOAT = "float"
    STR = "str"
    CHOICE = "choice"
    BOOL = "bool"  # BooleanOptionalAction: --flag / --no-flag, the last one given wins
    STORE_TRUE = "store_true"  # a bare switch
    NAMES = "names"  # one or more values (nargs="+")
    OPTIONAL_STR = "optional_str"  # a value or none (nargs="?")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise FlagValueError(f"invalid int value: {text!r}") from None


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise FlagValueError(f"invalid float value: {text!r}") from None


# The argparse `type` of each kind that takes a typed value.
PARSERS: Final[dict[Kind, Callable[[str], object]]] = {
    Kind.INT: _int,
    Kind.HUMAN_INT: human_readable_int,
    Kind.HUMAN_INT_OR_AUTO: human_readable_int_or_auto,
    Kind.FLOAT: _float,
}


@dataclass(frozen=True)
class VllmFlag:
    flag: str  # canonical spelling: what the renderer writes, what messages name
    dest: str
    kind: Kind
    default: object = None
    aliases: tuple[str, ...] = ()  # other spellings of the same option (-tp, deprecated names)
    negatives: tuple[str, ...] = ()  # BOOL only: spellings that set False
    choices: tuple[str, ...] = ()  # CHOICE only

    @property
    def spellings(self) -> tuple[str, ...]:
        return (self.flag, *self.aliases, *self.negatives)

    @property
    def takes_value(self) -> bool:
        return self.kind not in (Kind.BOOL, Kind.STORE_TRUE)


def _f(flag: str, kind: Kind, default: object = None, **extra: tuple[str, ...]) -> VllmFlag:
    return VllmFlag(flag, flag.removeprefix("--").replace("-", "_"), kind, default, **extra)


def _bool(flag: str, default: bool | None) -> VllmFlag:
    # BooleanOptionalAction adds --no-FLAG; vLLM's EnableDisableAction also pairs --enable-X with
    # --disable-X, the spelling it shows in help (vllm/utils/argparse_utils.py)
    negatives: tuple[str, ...] = ("--no-" + flag.removeprefix("--"),)
    if flag.startswith("--enable-"):
        negatives = ("--disable-" + flag.removeprefix("--enable-"), *negatives)
    return _f(flag, Kind.BOOL, default, negatives=negatives)


MODEL: Final = _f("--model", Kind.STR, "Qwen/Qwen3-0.6B")  # vllm/config/model.py
SERVED_MODEL_NAME: Final = _f("--served-model-name", Kind.NAMES)
HOST: Final = _f("--host", Kind.STR)
PORT: Final = _f("--port", Kind.INT, 8000)
HF_TOKEN: Final = _f("--hf-token", Kind.OPTIONAL_STR)
TENSOR_PARALLEL_SIZE: Final = _f("--tensor-parallel-size", Kind.INT, 1, aliases=("-tp",))
PIPELINE_PARALLEL_SIZE: Final = _f("--pipeline-parallel-size", Kind.INT, 1, aliases=("-pp",))
DATA_PARALLEL_SIZE: Final = _f("--data-parallel-size", Kind.INT, 1, aliases=("-dp",))
API_SERVER_COUNT: Final = _f("--api-server-count", Kind.INT, aliases=("-asc",))
MAX_MODEL_LEN: Final = _f("--max-model-len", Kind.HUMAN_INT_OR_AUTO)
DEFAULT_GPU_MEMORY_UTILIZATION: Final = 0.92  # 0.9 up to vLLM 0.19
GPU_MEMORY_UTILIZATION: Final = _f(
    "--gpu-memory-utilization",
    Kind.FLOAT,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    aliases=("--device-memory-utilization",),
)
KV_CACHE_DTYPE: Final = _f("--kv-cache-dtype", Kind.STR, "auto")
ENABLE_CHUNKED_PREFILL: Final = _bool("--enable-chunked-prefill", None)
ENABLE_PREFIX_CACHING: Final = _bool("--enable-prefix-caching", None)
SCHEDULING_POLICY: Final = _f(
    "--scheduling-policy", Kind.CHOICE, "fcfs", choices=("fcfs", "priority")
)
MAX_NUM_QUEUED_REQS: Final = _f("--max-num-queued-reqs", Kind.INT)
MAX_NUM_QUEUED_TOKENS: Final = _f("--max-num-queued-tokens", Kind.HUMAN_INT)
MAX_NUM_SEQS: Final = _f("--max-num-seqs", Kind.INT)
MAX_NUM_ACTIVE_SEQS: Final = _f("--max-num-active-seqs", Kind.INT)
MAX_NUM_BATCHED_TOKENS: Final = _f("--max-num-batched-tokens", Kind.HUMAN_INT)
MAX_NUM_SCHEDULED_TOKENS: Final = _f("--max-num-scheduled-tokens", Kind.HUMAN_INT)
LONG_PREFILL_TOKEN_THRESHOLD: Final = _f("--long-prefill-token-threshold", Kind.INT, 0)
LONG_PREFILL_TOKEN_THRESHOLD_ADAPTIVE: Final = _bool(
    "--long-prefill-token-threshold-adaptive", False
)
PREFILL_SCHEDULE_INTERVAL: Final = _f("--prefill-schedule-interval", Kind.INT, 1)
BLOCK_SIZE: Final = _f("--block-size", Kind.INT)
WATERMARK: Final = _f("--watermark", Kind.FLOAT, 0.0)
KV_CACHE_MEMORY_BYTES: Final = _f("--kv-cache-memory-bytes", Kind.HUMAN_INT)
NUM_GPU_BLOCKS_OVERRIDE: Final = _f("--num-gpu-blocks-override", Kind.INT)
PERFORMANCE_MODE: Final = _f(
    "--performance-mode",
    Kind.CHOICE,
    "balanced",
    choices=("balanced", "interactivity", "throughput"),
)
ASYNC_SCHEDULING: Final = _bool("--async-scheduling", None)
SCHEDULER_RESERVE_FULL_ISL: Final = _bool("--scheduler-reserve-full-isl", True)
STREAM_INTERVAL: Final = _f("--stream-interval", Kind.INT, 1)
DISABLE_LOG_STATS: Final = _f("--disable-log-stats", Kind.STORE_TRUE, False)
# seconds in-flight requests may finish after SIGTERM; 0 aborts them (vllm/engine/arg_utils.py)
SHUTDOWN_TIMEOUT: Final = _f("--shutdown-timeout", Kind.INT, 0)
DTYPE: Final = _f("--dtype", Kind.CHOICE, "auto", choices=MODEL_DTYPES)
# accepted by the twin because vLLM accepts them; they change nothing it models
TRUST_REMOTE_CODE: Final = _bool("--trust-remote-code", False)
ENFORCE_EAGER: Final = _bool("--enforce-eager", False)
DOWNLOAD_DIR: Final = _f("--download-dir", Kind.STR)
TOKENIZER: Final = _f("--tokenizer", Kind.STR)
SEED: Final = _f("--seed", Kind.INT, 0)
API_KEY: Final = _f("--api-key", Kind.NAMES)
# the key when --api-key is not given (vllm/entrypoints/serve/middleware/register.py)
API_KEY_ENV: Final = "VLLM_API_KEY"
UVICORN_LOG_LEVEL: Final = _f(
    "--uvicorn-log-level",
    Kind.CHOICE,
    "info",
    choices=("critical", "error", "warning", "info", "debug", "trace"),
)
# -O3 / -O=3 / -O 3 are rewritten to --optimization-level before argparse sees them
OPTIMIZATION_LEVEL: Final = _f("--optimization-level", Kind.STR, 2)

FLAGS: Final[tuple[VllmFlag, ...]] = (
    MODEL,
    SERVED_MODEL_NAME,
    HOST,
    PORT,
    HF_TOKEN,
    TENSOR_PARALLEL_SIZE,
    PIPELINE_PARALLEL_SIZE,
    DATA_PARALLEL_SIZE,
    API_SERVER_COUNT,
    MAX_MODEL_LEN,
    GPU_MEMORY_UTILIZATION,
    KV_CACHE_DTYPE,
    ENABLE_CHUNKED_PREFILL,
    ENABLE_PREFIX_CACHING,
    SCHEDULING_POLICY,
    MAX_NUM_QUEUED_REQS,
    MAX_NUM_QUEUED_TOKENS,
    MAX_NUM_SEQS,
    MAX_NUM_ACTIVE_SEQS,
    MAX_NUM_BATCHED_TOKENS,
    MAX_NUM_SCHEDULED_TOKENS,
    LONG_PREFILL_TOKEN_THRESHOLD,
    LONG_PREFILL_TOKEN_THRESHOLD_ADAPTIVE,
    PREFILL_SCHEDULE_INTERVAL,
    BLOCK_SIZE,
    WATERMARK,
    KV_CACHE_MEMORY_BYTES,
    NUM_GPU_BLOCKS_OVERRIDE,
    PERFORMANCE_MODE,
    ASYNC_SCHEDULING,
    SCHEDULER_RESERVE_FULL_ISL,
    STREAM_INTERVAL,
    DISABLE_LOG_STATS,
    SHUTDOWN_TIMEOUT,
    DTYPE,
    TRUST_REMOTE_CODE,
    ENFORCE_EAGER,
    DOWNLOAD_DIR,
    TOKENIZER,
    SEED,
    API_KEY,
    UVICORN_LOG_LEVEL,
    OPTIMIZATION_LEVEL,
)

BY_FLAG: Final = {f.flag: f for f in FLAGS}
BY_DEST: Final = {f.dest: f for f in FLAGS}

# Knobs that circulate in blog posts and older docs but that vLLM 0.33.0's parser does not know.
NOT_IN_VLLM: Final = ("--enable-batching", "--max-batch-size", "--priority-queue")
