"""The `vllm serve` flags that typed spec fields own, and knobs that do not exist in vLLM 0.33.

vLLM's facts (spellings, dests, the option list, how a token resolves) live in vllm_operator.vllm;
this module says which spec field owns which flag. One table serves three readers: the renderer
(which flag a field becomes), the extraArgs rules (which flags a user may not set in any spelling
vLLM accepts, in CEL and in Python) and the docs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Final

from vllm_operator.api.budgets import BUDGET_FIELDS
from vllm_operator.vllm import flags as vf
from vllm_operator.vllm.options import Resolution, resolve_dest, resolve_token, resolving_pattern


def _quoted(token: str) -> str:
    return f'"{token}"'


def extra_arg_field(index: int) -> str:
    return f"spec.engine.extraArgs[{index}]"


# RE2's [[:space:]] and [[:cntrl:]] (ASCII only), so Python and CEL agree on every input.
SPACE_CHARS: Final = frozenset(" \t\n\v\f\r")
CONTROL_CHARS: Final = frozenset(chr(c) for c in (*range(0x20), 0x7F))
SPACED_FLAG_PATTERN: Final = "^-[^=]*[[:space:]]"
SPACED_FLAG_REFUSAL: Final = (
    " holds a flag and a value in one element, which vLLM does not read as that flag; "
    "write them as two elements or as --flag=value"
)


def is_spaced_flag(token: str) -> bool:
    """`"--max-num-seqs 999"`: a dash-led element whose name part holds whitespace."""
    return token.startswith("-") and not SPACE_CHARS.isdisjoint(token.partition("=")[0])


def extra_arg_problem(token: str) -> str | None:
    """Why `token` may not be in spec.engine.extraArgs (the text after the quoted token).

    The owned-flag, removed-knob and spaced-flag checks are also CEL rules (api/rules.py); an
    unknown or ambiguous flag is refused here only, in the renderer: CEL cannot afford a regex
    over vLLM's 321 option strings per element.
    """
    owned = owned_flag_of(token)
    if owned is not None:
        return owned.refusal
    for knob in REMOVED_KNOBS:
        if knob.matches(token):
            return knob.refusal
    if is_spaced_flag(token):
        return SPACED_FLAG_REFUSAL
    return unresolved_flag_problem(resolve_token(token))


def unresolved_flag_problem(resolution: Resolution) -> str | None:
    """A dash-led element vLLM's parser would exit on: no such flag, or a prefix of several."""
    if resolution.ambiguous:
        options = ", ".join(resolution.ambiguous[:4])
        more = ", ..." if len(resolution.ambiguous) > 4 else ""
        return (
            f" is ambiguous to vLLM 0.33 (it could be {options}{more}), which exits on it; "
            "write the whole flag"
        )
    if resolution.unknown:
        return (
            " is not a vllm serve flag in vLLM 0.33, which exits on it; check the spelling "
            "(docs/vllm-0.33.md §1.1)"
        )
    return None


@dataclass(frozen=True)
class OwnedFlag:
    """A flag that the operator writes itself; extraArgs may not carry it in any spelling."""

    vllm: vf.VllmFlag
    owner: str  # who sets it instead: a spec field, or "the operator"
    why: str = ""  # appended to the refusal when the owner alone does not explain it

    @property
    def flag(self) -> str:
        return self.vllm.flag

    @property
    def negatives(self) -> tuple[str, ...]:
        return self.vllm.negatives

    @property
    def spellings(self) -> tuple[str, ...]:
        return self.vllm.spellings

    @cached_property
    def pattern(self) -> str:
        """Every token vLLM resolves to this flag (prefixes, `=`, `_`), as one RE2 regex."""
        return resolving_pattern(self.vllm.dest)

    @property
    def refusal(self) -> str:
        """What follows the quoted token in the message."""
        why = f"; {self.why}" if self.why else ""
        return f" is vLLM's {self.flag}, which {self.owner} owns{why}"

    def message(self, index: int, token: str) -> str:
        return f"{extra_arg_field(index)}: {_quoted(token)}{self.refusal}"


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
    def pattern(self) -> str:
        return flag_pattern(self.spellings)

    @property
    def refusal(self) -> str:
        return f": {self.flag} does not exist in vLLM 0.33; {self.instead}"

    def message(self, index: int, token: str) -> str:
        return f"{extra_arg_field(index)}: {_quoted(token)}{self.refusal}"

    def matches(self, token: str) -> bool:
        return re.search(self.pattern.removesuffix("$") + r"\Z", token) is not None


# Canonical flag names the renderer emits.
FLAG_SERVED_MODEL_NAME: Final = vf.SERVED_MODEL_NAME.flag
FLAG_PORT: Final = vf.PORT.flag
FLAG_TP: Final = vf.TENSOR_PARALLEL_SIZE.flag
FLAG_PP: Final = vf.PIPELINE_PARALLEL_SIZE.flag
FLAG_MAX_MODEL_LEN: Final = vf.MAX_MODEL_LEN.flag
FLAG_GPU_MEM: Final = vf.GPU_MEMORY_UTILIZATION.flag
FLAG_KV_CACHE_DTYPE: Final = vf.KV_CACHE_DTYPE.flag
FLAG_CHUNKED_PREFILL: Final = vf.ENABLE_CHUNKED_PREFILL.flag
FLAG_NO_CHUNKED_PREFILL: Final = vf.ENABLE_CHUNKED_PREFILL.negatives[0]
FLAG_PREFIX_CACHING: Final = vf.ENABLE_PREFIX_CACHING.flag
FLAG_NO_PREFIX_CACHING: Final = vf.ENABLE_PREFIX_CACHING.negatives[0]
FLAG_SCHEDULING_POLICY: Final = vf.SCHEDULING_POLICY.flag
FLAG_MAX_QUEUED_REQS: Final = vf.MAX_NUM_QUEUED_REQS.flag
FLAG_MAX_QUEUED_TOKENS: Final = vf.MAX_NUM_QUEUED_TOKENS.flag
FLAG_MAX_SEQS: Final = vf.MAX_NUM_SEQS.flag
FLAG_MAX_ACTIVE_SEQS: Final = vf.MAX_NUM_ACTIVE_SEQS.flag
FLAG_MAX_BATCHED_TOKENS: Final = vf.MAX_NUM_BATCHED_TOKENS.flag
FLAG_SHUTDOWN_TIMEOUT: Final = vf.SHUTDOWN_TIMEOUT.flag

OWNED_FLAGS: Final[tuple[OwnedFlag, ...]] = (
    OwnedFlag(vf.MODEL, "spec.model"),
    OwnedFlag(vf.SERVED_MODEL_NAME, "spec.servedModelName"),
    OwnedFlag(vf.PORT, "the operator", "it serves on port 8000, which probes and the Service use"),
    OwnedFlag(vf.HF_TOKEN, "spec.hfTokenSecret", "the token stays in a Secret"),
    OwnedFlag(vf.API_KEY, "spec.apiKeySecret", "the key stays in a Secret"),
    OwnedFlag(vf.TENSOR_PARALLEL_SIZE, "spec.engine.tensorParallelSize"),
    OwnedFlag(vf.PIPELINE_PARALLEL_SIZE, "spec.engine.pipelineParallelSize"),
    OwnedFlag(vf.MAX_MODEL_LEN, "spec.engine.maxModelLen"),
    OwnedFlag(vf.GPU_MEMORY_UTILIZATION, "spec.engine.gpuMemoryUtilization"),
    OwnedFlag(vf.KV_CACHE_DTYPE, "spec.engine.kvCacheDtype"),
    OwnedFlag(vf.ENABLE_CHUNKED_PREFILL, "spec.engine.enableChunkedPrefill"),
    OwnedFlag(vf.ENABLE_PREFIX_CACHING, "spec.engine.enablePrefixCaching"),
    OwnedFlag(vf.SCHEDULING_POLICY, "spec.engine.schedulingPolicy"),
    OwnedFlag(
        vf.SHUTDOWN_TIMEOUT,
        "the operator",
        "it drains a pod within the pod's terminationGracePeriodSeconds (docs/rollouts.md)",
    ),
    # the budget flags: one row per budget in the budget table (api/budgets.py)
    *(OwnedFlag(vf.BY_FLAG[b.flag], b.spec_path) for b in BUDGET_FIELDS),
)

_INSTEAD: Final = {
    "--enable-batching": "continuous batching is always on; size it with "
    "spec.budgets.running.maxSeqs",
    "--max-batch-size": "use spec.budgets.running.maxSeqs",
    "--priority-queue": "use spec.engine.schedulingPolicy: priority",
}
REMOVED_KNOBS: Final[tuple[RemovedKnob, ...]] = tuple(
    RemovedKnob(knob, _INSTEAD[knob]) for knob in vf.NOT_IN_VLLM
)

_OWNED_BY_DEST: Final = {f.vllm.dest: f for f in OWNED_FLAGS}


def owned_flag_of(token: str) -> OwnedFlag | None:
    """The owned flag vLLM would read `token` as, in whatever spelling it is written."""
    dest = resolve_dest(token)
    return None if dest is None else _OWNED_BY_DEST.get(dest)


def flag_pattern(spellings: tuple[str, ...]) -> str:
    """RE2/Python regex matching any spelling exactly, as `--flag` or `--flag=value`.

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
