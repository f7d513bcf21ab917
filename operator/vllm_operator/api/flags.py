"""The `vllm serve` flags that typed spec fields own, and knobs that do not exist in vLLM 0.33.

One table serves three readers: the renderer (which flag a field becomes), the extraArgs rules
(which flags a user may not repeat, in CEL and in Python) and the docs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class OwnedFlag:
    """A flag that the operator writes itself; extraArgs may not carry it in any spelling."""

    flag: str  # canonical spelling, as rendered
    instead: str  # what the user should write instead, ends the error message
    negatives: tuple[str, ...] = ()  # BooleanOptionalAction's negative spellings
    aliases: tuple[str, ...] = ()  # other accepted names (short forms, deprecated aliases)

    @property
    def spellings(self) -> tuple[str, ...]:
        return (self.flag, *self.negatives, *self.aliases)

    @property
    def message(self) -> str:
        return f"spec.engine.extraArgs may not set {self.flag}; {self.instead}"


@dataclass(frozen=True)
class RemovedKnob:
    """A knob that circulates in blog posts but that vLLM 0.33 does not have."""

    flag: str
    instead: str
    aliases: tuple[str, ...] = ()

    @property
    def spellings(self) -> tuple[str, ...]:
        return (self.flag, *self.aliases)

    @property
    def message(self) -> str:
        return f"{self.flag} does not exist in vLLM 0.33; {self.instead}"


def _use(field: str) -> str:
    return f"use {field}"


# Canonical flag names the renderer emits (docs/vllm-0.33.md §1.2).
FLAG_SERVED_MODEL_NAME: Final = "--served-model-name"
FLAG_PORT: Final = "--port"
FLAG_TP: Final = "--tensor-parallel-size"
FLAG_PP: Final = "--pipeline-parallel-size"
FLAG_MAX_MODEL_LEN: Final = "--max-model-len"
FLAG_GPU_MEM: Final = "--gpu-memory-utilization"
FLAG_KV_CACHE_DTYPE: Final = "--kv-cache-dtype"
FLAG_CHUNKED_PREFILL: Final = "--enable-chunked-prefill"
FLAG_NO_CHUNKED_PREFILL: Final = "--disable-chunked-prefill"
FLAG_PREFIX_CACHING: Final = "--enable-prefix-caching"
FLAG_NO_PREFIX_CACHING: Final = "--disable-prefix-caching"
FLAG_SCHEDULING_POLICY: Final = "--scheduling-policy"
FLAG_MAX_QUEUED_REQS: Final = "--max-num-queued-reqs"
FLAG_MAX_QUEUED_TOKENS: Final = "--max-num-queued-tokens"
FLAG_MAX_SEQS: Final = "--max-num-seqs"
FLAG_MAX_ACTIVE_SEQS: Final = "--max-num-active-seqs"
FLAG_MAX_BATCHED_TOKENS: Final = "--max-num-batched-tokens"

OWNED_FLAGS: Final[tuple[OwnedFlag, ...]] = (
    OwnedFlag("--model", _use("spec.model")),
    OwnedFlag(FLAG_SERVED_MODEL_NAME, _use("spec.servedModelName")),
    OwnedFlag(FLAG_PORT, "the operator serves on port 8000, which probes and the Service use"),
    OwnedFlag("--hf-token", "use spec.hfTokenSecret so the token stays in a Secret"),
    OwnedFlag(FLAG_TP, _use("spec.engine.tensorParallelSize"), aliases=("-tp",)),
    OwnedFlag(FLAG_PP, _use("spec.engine.pipelineParallelSize"), aliases=("-pp",)),
    OwnedFlag(FLAG_MAX_MODEL_LEN, _use("spec.engine.maxModelLen")),
    OwnedFlag(
        FLAG_GPU_MEM,
        _use("spec.engine.gpuMemoryUtilization"),
        aliases=("--device-memory-utilization",),
    ),
    OwnedFlag(FLAG_KV_CACHE_DTYPE, _use("spec.engine.kvCacheDtype")),
    OwnedFlag(
        FLAG_CHUNKED_PREFILL,
        _use("spec.engine.enableChunkedPrefill"),
        negatives=(FLAG_NO_CHUNKED_PREFILL, "--no-enable-chunked-prefill"),
    ),
    OwnedFlag(
        FLAG_PREFIX_CACHING,
        _use("spec.engine.enablePrefixCaching"),
        negatives=(FLAG_NO_PREFIX_CACHING, "--no-enable-prefix-caching"),
    ),
    OwnedFlag(FLAG_SCHEDULING_POLICY, _use("spec.engine.schedulingPolicy")),
)  # the budget flags' rows come from the budget table: api/budgets.py OWNED_BUDGET_FLAGS

REMOVED_KNOBS: Final[tuple[RemovedKnob, ...]] = (
    RemovedKnob(
        "--enable-batching",
        "continuous batching is always on; size it with spec.budgets.running.maxSeqs",
    ),
    RemovedKnob("--max-batch-size", _use("spec.budgets.running.maxSeqs")),
    RemovedKnob("--priority-queue", "use spec.engine.schedulingPolicy: priority"),
)


def flag_pattern(spellings: tuple[str, ...]) -> str:
    """RE2/Python regex matching any spelling as `--flag` or `--flag=value`.

    vLLM's FlexibleArgumentParser accepts `_` for `-` inside long flag names, so every inner dash
    matches either character. The pattern has no backslashes, so it drops into a CEL string as is.
    """
    alternatives = []
    for spelling in spellings:
        dashes = len(spelling) - len(spelling.lstrip("-"))
        name = spelling[dashes:]
        inner = "[-_]".join(name.split("-")) if dashes == 2 else name
        alternatives.append("-" * dashes + inner)
    return "^(" + "|".join(alternatives) + ")(=.*)?$"
