"""Cross-field rules, written once as data and enforced in two places.

Each rule carries a CEL expression (the CRD generator emits it as x-kubernetes-validations on the
schema node at `path`, so `kubectl apply` refuses the object) and a Python predicate over the
model object at the same path (the spec validators run it, so `vllm-operator render` and the
operator refuse the same objects). Both report the same `message`, which names the field.

CEL follows Kubernetes semantics: a rule on an absent object does not run, and optional fields are
guarded with has(). The Python side resolves `path` the same way and skips absent objects.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from vllm_operator.api import flags
from vllm_operator.api.budgets import BUDGET_KEYS, OWNED_BUDGET_FLAGS


@dataclass(frozen=True)
class Rule:
    path: tuple[str, ...]  # wire names from the resource root; () is the root itself
    cel: str
    message: str
    check: Callable[[Any], bool]  # True when the object at `path` obeys the rule
    field_path: str | None = None  # CEL fieldPath below `path`: where the API server points


def _re2_search(pattern: str, text: str) -> bool:
    # CEL's matches() is RE2 partial matching, where `$` is only the end of text; Python's `$`
    # also matches before a final newline, so swap it for \Z to agree on every input.
    return re.search(pattern.removesuffix("$") + r"\Z", text) is not None


def _le(low: int | None, high: int | None) -> bool:
    return low is None or high is None or low <= high


def _parallel_ok(spec: Any) -> bool:
    engine = spec.engine
    if engine is None or (
        engine.tensor_parallel_size is None and engine.pipeline_parallel_size is None
    ):
        return True
    pp = engine.pipeline_parallel_size or 1
    # CEL integer division truncates like Python's // for the positive values the schema allows.
    tp = engine.tensor_parallel_size or spec.gpu.count // pp
    return bool(tp * pp == spec.gpu.count)


def _batched_covers_model_len(spec: Any) -> bool:
    engine, budgets = spec.engine, spec.budgets
    if engine is None or engine.enable_chunked_prefill is not False or engine.max_model_len is None:
        return True
    if budgets is None or budgets.tokens is None or budgets.tokens.max_batched_tokens is None:
        return True
    return bool(budgets.tokens.max_batched_tokens >= engine.max_model_len)


def _batched_covers_seqs(budgets: Any) -> bool:
    if budgets.tokens is None or budgets.running is None:
        return True
    return _le(budgets.running.max_seqs, budgets.tokens.max_batched_tokens)


def _args_rule(spellings: tuple[str, ...], message: str) -> Rule:
    pattern = flags.flag_pattern(spellings)
    return Rule(
        path=("spec", "engine", "extraArgs"),
        cel=f"self.all(a, !a.matches('{pattern}'))",
        message=message,
        check=lambda args: not any(_re2_search(pattern, a) for a in args),
    )


def _bounds_rule(key: str) -> Rule:
    at = f"spec.autotune.bounds.{key}"
    return Rule(
        path=("spec", "autotune", "bounds", key),
        cel="!has(self.min) || !has(self.max) || self.min <= self.max",
        message=f"{at}.min must be <= {at}.max",
        check=lambda b: _le(b.min, b.max),
        field_path=".min",
    )


# Every flag a typed spec field owns: the engine settings', then the budgets'.
OWNED_FLAGS: Final = (*flags.OWNED_FLAGS, *OWNED_BUDGET_FLAGS)
_HF_TOKEN_VARS: Final = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
# The Service is named after the object, and Service names are DNS-1035 labels.
_DNS1035_LABEL: Final = "^[a-z]([-a-z0-9]*[a-z0-9])?$"

RULES: Final[tuple[Rule, ...]] = (
    Rule(
        path=(),
        cel="self.metadata.name != 'vllm'",
        message=(
            'metadata.name may not be "vllm": a Service of that name makes Kubernetes inject '
            "VLLM_PORT into pods, which vLLM refuses at startup"
        ),
        check=lambda svc: svc.metadata.get("name") != "vllm",
    ),
    Rule(
        path=(),
        cel="size(self.metadata.name) <= 63",
        message="metadata.name must be at most 63 characters: it names the Service and labels",
        check=lambda svc: len(str(svc.metadata.get("name", ""))) <= 63,
    ),
    Rule(
        path=(),
        cel=f"self.metadata.name.matches('{_DNS1035_LABEL}')",
        message=(
            "metadata.name must start with a lower-case letter and hold only lower-case letters, "
            "digits and '-': it names the Service"
        ),
        check=lambda svc: _re2_search(_DNS1035_LABEL, str(svc.metadata.get("name", ""))),
    ),
    Rule(
        path=("spec", "budgets", "running"),
        cel="!has(self.maxActiveSeqs) || !has(self.maxSeqs) || self.maxActiveSeqs <= self.maxSeqs",
        message="spec.budgets.running.maxActiveSeqs must be <= spec.budgets.running.maxSeqs",
        check=lambda r: _le(r.max_active_seqs, r.max_seqs),
        field_path=".maxActiveSeqs",
    ),
    Rule(
        path=("spec", "budgets"),
        cel=(
            "!has(self.tokens) || !has(self.tokens.maxBatchedTokens) || !has(self.running)"
            " || !has(self.running.maxSeqs) || self.tokens.maxBatchedTokens >= self.running.maxSeqs"
        ),
        message="spec.budgets.tokens.maxBatchedTokens must be >= spec.budgets.running.maxSeqs",
        check=_batched_covers_seqs,
        field_path=".tokens.maxBatchedTokens",
    ),
    Rule(
        path=("spec",),
        cel=(
            "!has(self.engine) || !has(self.engine.enableChunkedPrefill)"
            " || self.engine.enableChunkedPrefill || !has(self.engine.maxModelLen)"
            " || !has(self.budgets) || !has(self.budgets.tokens)"
            " || !has(self.budgets.tokens.maxBatchedTokens)"
            " || self.budgets.tokens.maxBatchedTokens >= self.engine.maxModelLen"
        ),
        message=(
            "spec.budgets.tokens.maxBatchedTokens must be >= spec.engine.maxModelLen"
            " when spec.engine.enableChunkedPrefill is false"
        ),
        check=_batched_covers_model_len,
    ),
    Rule(
        path=("spec",),
        cel=(
            "!has(self.engine)"
            " || (!has(self.engine.tensorParallelSize) && !has(self.engine.pipelineParallelSize))"
            " || (has(self.engine.tensorParallelSize) ? self.engine.tensorParallelSize"
            " : self.gpu.count / (has(self.engine.pipelineParallelSize)"
            " ? self.engine.pipelineParallelSize : 1))"
            " * (has(self.engine.pipelineParallelSize) ? self.engine.pipelineParallelSize : 1)"
            " == self.gpu.count"
        ),
        message=(
            "spec.engine.tensorParallelSize * spec.engine.pipelineParallelSize"
            " must equal spec.gpu.count"
        ),
        check=_parallel_ok,
    ),
    Rule(
        path=("spec", "autoscaling"),
        cel="!has(self.enabled) || !self.enabled || has(self.maxReplicas)",
        message="spec.autoscaling.maxReplicas is required when spec.autoscaling.enabled is true",
        check=lambda a: not a.enabled or a.max_replicas is not None,
    ),
    Rule(
        path=("spec", "autoscaling"),
        cel=(
            "!has(self.minReplicas) || !has(self.maxReplicas)"
            " || self.minReplicas <= self.maxReplicas"
        ),
        message="spec.autoscaling.minReplicas must be <= spec.autoscaling.maxReplicas",
        check=lambda a: _le(a.min_replicas, a.max_replicas),
        field_path=".minReplicas",
    ),
    *(_bounds_rule(key) for key in BUDGET_KEYS),
    *(_args_rule(f.spellings, f.message) for f in OWNED_FLAGS),
    *(_args_rule(k.spellings, k.message) for k in flags.REMOVED_KNOBS),
    Rule(
        path=("spec", "engine", "env"),
        cel=f"self.all(e, !(e.name in {list(_HF_TOKEN_VARS)!r}) || !has(e.value))",
        message="spec.engine.env may not set HF_TOKEN to a literal value; use spec.hfTokenSecret",
        check=lambda env: not any(e.name in _HF_TOKEN_VARS and e.value is not None for e in env),
    ),
)


def _wire_child(obj: Any, wire_name: str) -> Any:
    fields = type(obj).model_fields
    for attr, info in fields.items():
        if wire_name in (info.alias, attr):
            return getattr(obj, attr)
    raise KeyError(f"{type(obj).__name__} has no field {wire_name!r}")


def _resolve(obj: Any, path: Sequence[str]) -> Any:
    for wire_name in path:
        if obj is None:
            return None
        obj = _wire_child(obj, wire_name)
    return obj


def rules_below(prefix: tuple[str, ...]) -> Iterator[Rule]:
    """Rules whose path starts with `prefix` ("spec",) or is exactly the root (())."""
    for rule in RULES:
        if rule.path[: len(prefix)] == prefix and (prefix or not rule.path):
            yield rule


def broken_rules(obj: Any, prefix: tuple[str, ...]) -> list[str]:
    """Messages of the rules under `prefix` that `obj` (the object at `prefix`) breaks."""
    messages = []
    for rule in rules_below(prefix):
        target = _resolve(obj, rule.path[len(prefix) :])
        if target is not None and not rule.check(target):
            messages.append(rule.message)
    return messages
