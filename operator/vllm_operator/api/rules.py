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
from vllm_operator.api.budgets import BUDGET_KEYS
from vllm_operator.api.durations import parse_duration
from vllm_operator.constants import TMP_PATH, VLLM_CACHE_ROOT, VLLM_HOME
from vllm_operator.vllm import flags as vf


@dataclass(frozen=True)
class Rule:
    path: tuple[str, ...]  # wire names from the resource root; () is the root itself
    cel: str
    message: str
    check: Callable[[Any], bool]  # True when the object at `path` obeys the rule
    field_path: str | None = None  # CEL fieldPath below `path`: where the API server points
    # each=True: the rule is on every element of the list at `path` (the CRD puts it on
    # `items`), so the API server names the element, `spec.engine.extraArgs[2]`, itself.
    each: bool = False
    # The message for the object at hand: CEL's messageExpression and its Python twin; the API
    # server falls back to `message` should the expression fail.
    message_expression: str | None = None
    describe: Callable[[Any], str] | None = None

    def messages_for(self, target: Any) -> list[str]:
        """The lines a broken rule reports: one per offending element for an `each` rule."""
        if not self.each:
            return [self.message if self.describe is None else self.describe(target)]
        where = ".".join(self.path)
        describe = self.describe or (lambda _: self.message)
        return [f"{where}[{i}]: {describe(e)}" for i, e in enumerate(target) if not self.check(e)]

    def holds(self, target: Any) -> bool:
        return all(self.check(e) for e in target) if self.each else self.check(target)


def _re2_search(pattern: str, text: str) -> bool:
    # CEL's matches() is RE2 partial matching, where `$` is only the end of text; Python's `$`
    # also matches before a final newline, so swap it for \Z to agree on every input.
    return re.search(pattern.removesuffix("$") + r"\Z", text) is not None


MIN_FORECAST_PERIOD: Final = "15m"  # metrics/past_period.py PAST_AFTER: no sample from the future
# a year: beyond any Prometheus retention in use, and far inside the range of a Go duration (CEL's
# duration() fails past 292 years) and of Python's timedelta
MAX_FORECAST_PERIOD: Final = "8760h"


def _forecast_period_ok(a: Any) -> bool:
    if a.forecast_period is None:
        return True
    seconds = parse_duration(a.forecast_period)
    low, high = parse_duration(MIN_FORECAST_PERIOD), parse_duration(MAX_FORECAST_PERIOD)
    return seconds == 0 or low <= seconds <= high


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


def _cel_string(text: str) -> str:
    """`text` as a single-quoted CEL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _element_rule(pattern: str, refused: Callable[[str], bool], refusal: str, message: str) -> Rule:
    """No extraArgs element may match `pattern` (CEL) / `refused` (Python, the same set, proven
    by tests); the message quotes the element. A rule per element keeps CEL's cost estimate
    within the API server's budget, which a list-wide filter() in messageExpression is not."""
    return Rule(
        path=("spec", "engine", "extraArgs"),
        cel=f"!self.matches('{pattern}')",
        message=message,
        check=lambda arg: not refused(arg),
        each=True,
        message_expression="'\"' + self + " + _cel_string('"' + refusal),
        describe=lambda arg: f'"{arg}"{refusal}',
    )


def _owned_rule(owned: flags.OwnedFlag) -> Rule:
    return _element_rule(
        owned.pattern,
        lambda a: flags.owned_flag_of(a) is owned,
        owned.refusal,
        f"spec.engine.extraArgs may not set vLLM's {owned.flag} in any spelling; "
        f"{owned.owner} owns it",
    )


def _knob_rule(knob: flags.RemovedKnob) -> Rule:
    return _element_rule(
        knob.pattern, knob.matches, knob.refusal, f"{knob.flag} does not exist in vLLM 0.33"
    )


def _argv_name_rule(name: str, where: str, *, optional: bool) -> Rule:
    """A spec value that becomes one argv element may not read as a flag or split vLLM's argv."""
    guard = f"!has(self.{name}) || " if optional else ""
    return Rule(
        path=("spec",),
        cel=(
            f"{guard}(!self.{name}.startsWith('-') && !self.{name}.matches('[[:space:][:cntrl:]]'))"
        ),
        message=(
            f"spec.{name} may not start with '-' or hold whitespace or control characters: "
            f"it is {where}"
        ),
        check=lambda spec: argv_safe(_wire_child(spec, name)),
        field_path=f".{name}",
    )


def argv_safe(value: str | None) -> bool:
    """No leading '-', no whitespace, no control character: one argv element, never a flag."""
    if value is None:
        return True
    bad = flags.SPACE_CHARS | flags.CONTROL_CHARS
    return not value.startswith("-") and bad.isdisjoint(value)


def _bounds_rule(key: str) -> Rule:
    at = f"spec.autotune.bounds.{key}"
    return Rule(
        path=("spec", "autotune", "bounds", key),
        cel="!has(self.min) || !has(self.max) || self.min <= self.max",
        message=f"{at}.min must be <= {at}.max",
        check=lambda b: _le(b.min, b.max),
        field_path=".min",
    )


def _owned_env_rule(name: str, owner: str) -> Rule:
    return Rule(
        path=("spec", "engine", "env"),
        cel=f"self.name != '{name}'",
        message=f"{name} is set by the operator from {owner}; use {owner}",
        check=lambda e: e.name != name,
        each=True,
    )


# The directories of the image's system, and the paths the operator mounts itself (a second
# volume at the same path is refused by the API server only when the Deployment is applied).
_SYSTEM_DIRS: Final = "bin|boot|dev|etc|lib|lib32|lib64|libx32|proc|run|sbin|sys|usr|var/run"
_SYSTEM_PATH: Final = f"^/({_SYSTEM_DIRS})(/|$)"
_DOT_SEGMENT: Final = "/[.][.]?(/|$)"
OPERATOR_MOUNTS: Final = (TMP_PATH, VLLM_HOME, VLLM_CACHE_ROOT)


def mount_path_ok(path: str) -> bool:
    # The schema's pattern keeps newlines out, so Python's `$` means what RE2's does here.
    return not (
        re.search(_SYSTEM_PATH, path)
        or re.search(_DOT_SEGMENT, path)
        or path in OPERATOR_MOUNTS
        or path == "/"
    )


# Every flag a typed spec field owns (the budgets' rows come from the budget table).
OWNED_FLAGS: Final = flags.OWNED_FLAGS
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
    Rule(
        path=("spec", "autoscaling"),
        cel=(
            "!has(self.forecastPeriod) || duration(self.forecastPeriod) == duration('0s')"
            f" || (duration(self.forecastPeriod) >= duration('{MIN_FORECAST_PERIOD}')"
            f" && duration(self.forecastPeriod) <= duration('{MAX_FORECAST_PERIOD}'))"
        ),
        message=(
            f"spec.autoscaling.forecastPeriod must be 0s (off) or from {MIN_FORECAST_PERIOD} to"
            f" {MAX_FORECAST_PERIOD} (a year): the forecast reads up to {MIN_FORECAST_PERIOD}"
            " past one period ago"
        ),
        check=_forecast_period_ok,
        field_path=".forecastPeriod",
    ),
    *(_bounds_rule(key) for key in BUDGET_KEYS),
    _argv_name_rule("model", "vllm serve's first argument", optional=False),
    _argv_name_rule("servedModelName", "the value of --served-model-name", optional=True),
    *(_owned_rule(f) for f in flags.OWNED_FLAGS),
    *(_knob_rule(k) for k in flags.REMOVED_KNOBS),
    _element_rule(
        flags.SPACED_FLAG_PATTERN,
        flags.is_spaced_flag,
        flags.SPACED_FLAG_REFUSAL,
        "spec.engine.extraArgs may not hold a flag and its value in one element",
    ),
    Rule(
        path=("spec", "engine", "env"),
        cel=f"self.all(e, !(e.name in {list(_HF_TOKEN_VARS)!r}) || !has(e.value))",
        message="spec.engine.env may not set HF_TOKEN to a literal value; use spec.hfTokenSecret",
        check=lambda env: not any(e.name in _HF_TOKEN_VARS and e.value is not None for e in env),
    ),
    _owned_env_rule(vf.API_KEY_ENV, "spec.apiKeySecret"),
    Rule(
        path=("spec", "modelCache"),
        cel=(
            f"!self.mountPath.matches('{_SYSTEM_PATH}')"
            f" && !self.mountPath.matches('{_DOT_SEGMENT}')"
            f" && !(self.mountPath in {list(OPERATOR_MOUNTS)!r})"
        ),
        message=(
            "spec.modelCache.mountPath may not be a system directory (/etc, /usr, /dev, ...), "
            "hold . or .. segments, or be a path the operator mounts "
            f"({', '.join(OPERATOR_MOUNTS)})"
        ),
        check=lambda cache: mount_path_ok(cache.mount_path),
        field_path=".mountPath",
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
        if target is not None and not rule.holds(target):
            messages.extend(rule.messages_for(target))
    return messages
