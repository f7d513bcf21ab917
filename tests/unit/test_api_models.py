"""VLLMService models: every field good and bad, every cross-field rule, error wording."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from tests.fixtures.specs.cases import BAD_SPECS, GOOD_SPECS, SpecCase, load_cases, merge_patch
from vllm_operator.api import flags
from vllm_operator.api.durations import parse_duration
from vllm_operator.api.errors import InvalidSpecError, format_location, parse_vllmservice
from vllm_operator.api.rules import RULES, Rule
from vllm_operator.api.spec import EnvVar, RunningBudgets, VLLMServiceSpec
from vllm_operator.api.status import VLLMServiceStatus
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.constants import API_VERSION, KIND

BAD = load_cases(BAD_SPECS)
GOOD = load_cases(GOOD_SPECS)
BASE: dict[str, Any] = GOOD[0].obj


def _messages(obj: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidSpecError) as info:
        parse_vllmservice(obj)
    return info.value.messages


@pytest.mark.parametrize("case", GOOD, ids=lambda c: c.name)
def test_good_specs_are_accepted(case: SpecCase) -> None:
    svc = parse_vllmservice(case.obj)
    assert svc.name == case.obj["metadata"]["name"]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.name)
def test_bad_specs_are_refused_with_the_exact_message(case: SpecCase) -> None:
    assert _messages(case.obj) == [case.message]


def _elements(rule: Rule, obj: dict[str, Any]) -> list[Any]:
    """The list an `each` rule checks, as the models hold it (env entries are EnvVars)."""
    target: Any = obj
    for key in rule.path:
        target = target.get(key, {}) if isinstance(target, dict) else {}
    items = target if isinstance(target, list) else []
    return [EnvVar.model_validate(e) if isinstance(e, dict) else e for e in items]


def test_every_rule_has_a_bad_case_and_rule_cases_use_rule_messages() -> None:
    """Each rule case's message is one rule's, and every rule has a case."""
    covered: set[str] = set()
    for case in BAD:
        if case.source != "rule":
            continue
        hits = [
            r.cel
            for r in RULES
            if (
                case.message in r.messages_for(_elements(r, case.obj))
                if r.each
                else r.message == case.message
            )
        ]
        assert len(hits) == 1, case.name
        covered.update(hits)
    assert covered == {rule.cel for rule in RULES}


def test_schema_cases_name_their_field() -> None:
    for case in BAD:
        assert case.source in ("rule", "schema"), case.name
        if case.source == "schema":
            assert case.field is not None and case.message is not None
            assert case.message.startswith(f"{case.field}: "), case.name


def test_all_broken_rules_are_reported_together() -> None:
    obj = merge_patch(
        BASE,
        {
            "spec": {
                "budgets": {"running": {"maxSeqs": 8, "maxActiveSeqs": 16}},
                "engine": {"extraArgs": ["--max-batch-size=4"]},
            }
        },
    )
    assert _messages(obj) == [
        "spec.budgets.running.maxActiveSeqs must be <= spec.budgets.running.maxSeqs",
        'spec.engine.extraArgs[0]: "--max-batch-size=4": --max-batch-size does not exist in '
        "vLLM 0.33; use spec.budgets.running.maxSeqs",
    ]


def test_field_errors_are_all_reported_with_camel_case_paths() -> None:
    obj = merge_patch(
        BASE,
        {"spec": {"replicas": -1, "budgets": {"queue": {"maxRequests": 0}}, "foo": 1}},
    )
    assert _messages(obj) == [
        "spec.replicas: Input should be greater than or equal to 0",
        "spec.budgets.queue.maxRequests: Input should be greater than or equal to 1",
        "spec.foo: unknown field",
    ]


def test_root_rules_wait_for_a_valid_spec_and_name_is_required() -> None:
    assert _messages(merge_patch(BASE, {"metadata": {"name": None}})) == [
        "metadata.name is required"
    ]


def test_defaults_leave_every_budget_and_engine_field_to_vllm() -> None:
    spec = parse_vllmservice(BASE).spec
    assert spec.replicas == 1
    assert spec.gpu.count == 1
    assert spec.gpu.fallback_types == []
    assert spec.image is None
    assert spec.budgets is None and spec.engine is None and spec.slo is None
    full = VLLMServiceSpec.model_validate(
        {"model": "m", "gpu": {"type": "L4"}, "budgets": {"queue": {}, "running": {}, "tokens": {}}}
    )
    assert full.budgets is not None and full.budgets.queue is not None
    assert full.budgets.queue.max_requests is None


def test_autotune_and_autoscaling_defaults() -> None:
    spec = parse_vllmservice(
        merge_patch(BASE, {"spec": {"autotune": {}, "autoscaling": {}, "compileCache": {}}})
    ).spec
    assert spec.autotune is not None and spec.autotune.mode == "Off"
    assert spec.autotune.max_restarts_per_hour == 1
    assert spec.autoscaling is not None
    assert (spec.autoscaling.enabled, spec.autoscaling.min_replicas) == (False, 1)
    assert spec.compile_cache is not None and spec.compile_cache.enabled


def test_snake_case_input_and_camel_case_output() -> None:
    running = RunningBudgets(max_seqs=16, max_active_seqs=8)
    assert running.model_dump(by_alias=True) == {"maxSeqs": 16, "maxActiveSeqs": 8}
    svc = parse_vllmservice(BASE)
    again = VLLMService.model_validate(svc.model_dump(by_alias=True, exclude_none=True))
    assert again == svc


def test_snake_case_errors_are_reported_in_camel_case() -> None:
    with pytest.raises(ValidationError) as info:
        RunningBudgets.model_validate({"max_active_seqs": 0})
    from vllm_operator.api.errors import format_validation_error

    assert format_validation_error(info.value, prefix=("spec", "budgets", "running")) == [
        "spec.budgets.running.maxActiveSeqs: Input should be greater than or equal to 1"
    ]


def test_spec_models_are_frozen() -> None:
    spec = parse_vllmservice(BASE).spec
    with pytest.raises(ValidationError):
        spec.replicas = 3  # type: ignore[misc]


def test_api_version_and_kind_match_constants() -> None:
    svc = parse_vllmservice(BASE)
    assert (svc.api_version, svc.kind) == (API_VERSION, KIND)
    wrong = merge_patch(BASE, {"kind": "Deployment"})
    assert _messages(wrong) == ["kind: Input should be 'VLLMService'"]


def test_metadata_accessors() -> None:
    svc = parse_vllmservice(merge_patch(BASE, {"metadata": {"uid": "u-1"}}))
    assert (svc.name, svc.namespace, svc.uid) == ("spec-case", "default", "u-1")
    bare = parse_vllmservice(merge_patch(BASE, {"metadata": {"namespace": None}}))
    assert (bare.namespace, bare.uid) == (None, None)


def _all_models(root: type[BaseModel]) -> set[type[BaseModel]]:
    seen: set[type[BaseModel]] = set()
    todo = [root]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for info in model.model_fields.values():
            for arg in _type_args(info.annotation):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    todo.append(arg)
    return seen


def _type_args(annotation: Any) -> list[Any]:
    out = [annotation]
    for arg in getattr(annotation, "__args__", ()):
        out += _type_args(arg)
    return out


def test_every_field_has_a_description() -> None:
    missing = [
        f"{model.__name__}.{name}"
        for model in _all_models(VLLMService)
        for name, info in model.model_fields.items()
        if not info.description
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("1.5s", 1.5),
        ("60ms", 0.06),
        ("1m30s", 90.0),
        ("2h", 7200.0),
        (".5s", 0.5),
        ("250us", 0.00025),
        ("100ns", 1e-7),
        ("1h1m1s", 3661.0),
    ],
)
def test_durations_parse_to_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "5 s", "-1s", "1d", "ms", "1.5.s", "1S", "s5"])
def test_bad_durations_name_the_accepted_form(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration such as 500ms"):
        parse_duration(text)


def test_slo_seconds_accessors() -> None:
    obj = merge_patch(BASE, {"spec": {"slo": {"ttftP95": "500ms", "itlP95": "1.5s"}}})
    slo = parse_vllmservice(obj).spec.slo
    assert slo is not None
    assert (slo.ttft_p95_seconds, slo.itl_p95_seconds) == (0.5, 1.5)
    assert slo.ttft_p95 == "500ms"  # the user's text is what goes back on the wire


@pytest.mark.parametrize(
    ("spellings", "matching", "not_matching"),
    [
        (
            ("--max-num-seqs",),
            ["--max-num-seqs", "--max_num_seqs=4", "--max-num_seqs", "--max-num-seqs="],
            [
                "--max-num-seqsx",
                "--max-num-seq",
                "max-num-seqs",
                "-max-num-seqs",
                "x--max-num-seqs",
            ],
        ),
        (
            ("--tensor-parallel-size", "-tp"),
            ["-tp", "-tp=2", "--tensor_parallel_size"],
            ["-tpx", "--tp", "-t"],
        ),
        (
            ("--model",),
            ["--model", "--model=x"],
            ["--model-impl", "--modelx", "--served-model-name"],
        ),
    ],
)
def test_flag_patterns(
    spellings: tuple[str, ...], matching: list[str], not_matching: list[str]
) -> None:
    import re

    pattern = flags.flag_pattern(spellings)
    assert "\\" not in pattern  # drops into a single-quoted CEL string unchanged
    assert [a for a in matching if re.search(pattern, a)] == matching
    assert [a for a in not_matching if re.search(pattern, a)] == []


def test_extra_args_with_a_trailing_newline_is_a_spaced_flag_not_the_owned_one() -> None:
    obj = merge_patch(BASE, {"spec": {"engine": {"extraArgs": ["--max-num-seqs\n"]}}})
    # RE2's `$` is end of text only, so the owned-flag regex does not match (vLLM would not read
    # it as --max-num-seqs either); the whitespace rule refuses it, in CEL and here alike.
    assert _messages(obj) == [
        'spec.engine.extraArgs[0]: "--max-num-seqs\n"' + flags.SPACED_FLAG_REFUSAL
    ]


STATUS = {
    "observedGeneration": 3,
    "conditions": [
        {
            "type": "Ready",
            "status": "True",
            "reason": "ReplicasAvailable",
            "message": "2/2 replicas ready",
            "observedGeneration": 3,
            "lastTransitionTime": "2026-01-02T03:04:05Z",
        }
    ],
    "replicas": 2,
    "readyReplicas": 2,
    "updatedReplicas": 2,
    "selector": "serving.vllmop.io/vllmservice=chat",
    "effective": {"args": ["m", "--port", "8000"], "budgets": {"maxSeqs": 16}},
    "metrics": {"window": "5m", "ttftP95Seconds": 0.41, "rejectionRatio": 0.0},
    "tuning": {
        "overrides": {"maxActiveSeqs": 8},
        "desiredReplicas": 3,
        "lastDecisions": [
            {
                "time": "2026-01-02T03:04:05Z",
                "action": "SetBudget",
                "reason": "ItlAboveTarget",
                "field": "maxActiveSeqs",
                "fromValue": 16,
                "toValue": 8,
                "figures": {"itlP95Seconds": 0.09},
            }
        ],
        "restartsInLastHour": 1,
        "restartTimes": ["2026-01-02T03:04:05Z"],
        "cooldownUntil": "2026-01-02T04:04:05Z",
    },
    "gpu": {"resolvedType": "H100-80GB", "resourceName": "nvidia.com/gpu", "unknown": False},
}


def test_status_parses_and_dumps_back_to_the_same_wire_form() -> None:
    status = VLLMServiceStatus.model_validate(STATUS)
    assert status.tuning is not None and status.tuning.overrides is not None
    assert status.tuning.overrides.max_active_seqs == 8
    dumped = status.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True, mode="json")
    assert dumped == STATUS


def test_status_is_tolerant_of_unknown_fields_and_empty() -> None:
    assert VLLMServiceStatus.model_validate({"someFutureField": 1}) == VLLMServiceStatus()
    svc = parse_vllmservice({**copy.deepcopy(BASE), "status": STATUS})
    assert svc.status is not None and svc.status.replicas == 2


def test_decision_list_is_bounded() -> None:
    decision = STATUS["tuning"]["lastDecisions"][0]
    with pytest.raises(ValidationError):
        VLLMServiceStatus.model_validate({"tuning": {"lastDecisions": [decision] * 11}})


@pytest.mark.parametrize(
    ("loc", "path"),
    [
        (("spec", "budgets", "running", "maxSeqs"), "spec.budgets.running.maxSeqs"),
        (("spec", "budgets", "running", "max_seqs"), "spec.budgets.running.maxSeqs"),
        (("spec", "engine", "env", 2, "name"), "spec.engine.env[2].name"),
        (("gpuCatalog", "H100-80GB", "memoryGiB"), "gpuCatalog.H100-80GB.memoryGiB"),
        ((), ""),
    ],
)
def test_format_location(loc: tuple[int | str, ...], path: str) -> None:
    assert format_location(loc) == path
