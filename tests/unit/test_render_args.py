"""`vllm serve` args: every typed field's flag, the documented order, omission of unset fields."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.fixtures.specs.cases import merge_patch
from vllm_operator.api import flags, rules
from vllm_operator.api.errors import parse_vllmservice
from vllm_operator.api.status import BudgetValues
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.config import load_operator_config
from vllm_operator.render import (
    NO_OVERRIDES,
    RenderError,
    apply_overrides,
    build_args,
    overrides_from_status,
    render_all,
)

BASE: dict[str, Any] = {
    "apiVersion": "serving.vllmop.io/v1alpha1",
    "kind": "VLLMService",
    "metadata": {"name": "chat", "namespace": "llm"},
    "spec": {"model": "Qwen/Qwen2.5-7B-Instruct", "gpu": {"type": "H100-80GB"}},
}
DEFAULT_ARGS = [
    "Qwen/Qwen2.5-7B-Instruct",
    "--port", "8000",
    "--shutdown-timeout", "60",
    "--tensor-parallel-size", "1",
]  # fmt: skip


def _svc(patch: dict[str, Any]) -> VLLMService:
    return parse_vllmservice(merge_patch(BASE, patch))


def _args(spec_patch: dict[str, Any], overrides: BudgetValues = NO_OVERRIDES) -> list[str]:
    return build_args(apply_overrides(_svc({"spec": spec_patch}).spec, overrides))


def test_unset_fields_are_omitted() -> None:
    assert _args({}) == DEFAULT_ARGS
    empty_groups = {"budgets": {"queue": {}, "running": {}, "tokens": {}}, "engine": {}}
    assert _args(empty_groups) == DEFAULT_ARGS


@pytest.mark.parametrize(
    ("spec_patch", "added"),
    [
        ({"servedModelName": "chat"}, ["--served-model-name", "chat"]),
        ({"budgets": {"queue": {"maxRequests": 32}}}, ["--max-num-queued-reqs", "32"]),
        ({"budgets": {"queue": {"maxPrefillTokens": 12000}}}, ["--max-num-queued-tokens", "12000"]),
        ({"budgets": {"running": {"maxSeqs": 16}}}, ["--max-num-seqs", "16"]),
        ({"budgets": {"running": {"maxActiveSeqs": 8}}}, ["--max-num-active-seqs", "8"]),
        ({"budgets": {"tokens": {"maxBatchedTokens": 4096}}}, ["--max-num-batched-tokens", "4096"]),
        ({"engine": {"maxModelLen": 8192}}, ["--max-model-len", "8192"]),
        ({"engine": {"gpuMemoryUtilization": 0.9}}, ["--gpu-memory-utilization", "0.9"]),
        ({"engine": {"gpuMemoryUtilization": 1}}, ["--gpu-memory-utilization", "1.0"]),
        ({"engine": {"enableChunkedPrefill": True}}, ["--enable-chunked-prefill"]),
        ({"engine": {"enableChunkedPrefill": False}}, ["--disable-chunked-prefill"]),
        ({"engine": {"enablePrefixCaching": True}}, ["--enable-prefix-caching"]),
        ({"engine": {"enablePrefixCaching": False}}, ["--disable-prefix-caching"]),
        ({"engine": {"schedulingPolicy": "priority"}}, ["--scheduling-policy", "priority"]),
        ({"engine": {"kvCacheDtype": "fp8"}}, ["--kv-cache-dtype", "fp8"]),
        ({"engine": {"extraArgs": ["--enforce-eager"]}}, ["--enforce-eager"]),
    ],
)
def test_each_field_maps_to_its_flag(spec_patch: dict[str, Any], added: list[str]) -> None:
    args = _args(spec_patch)
    # Exactly the expected items were added to the defaults, as one contiguous run.
    starts = [i for i in range(len(args)) if args[i : i + len(added)] == added]
    assert len(starts) == 1
    start = starts[0]
    assert args[:start] + args[start + len(added) :] == DEFAULT_ARGS


@pytest.mark.parametrize(
    ("gpu", "engine", "parallel"),
    [
        ({"count": 1}, {}, ["--tensor-parallel-size", "1"]),
        ({"count": 4}, {}, ["--tensor-parallel-size", "4"]),
        ({"count": 4}, {"tensorParallelSize": 4}, ["--tensor-parallel-size", "4"]),
        (
            {"count": 4},
            {"pipelineParallelSize": 2},
            ["--tensor-parallel-size", "2", "--pipeline-parallel-size", "2"],
        ),
        (
            {"count": 8},
            {"tensorParallelSize": 2, "pipelineParallelSize": 4},
            ["--tensor-parallel-size", "2", "--pipeline-parallel-size", "4"],
        ),
        ({"count": 2}, {"pipelineParallelSize": 1}, ["--tensor-parallel-size", "2"]),
    ],
)
def test_parallel_sizes(gpu: dict[str, Any], engine: dict[str, Any], parallel: list[str]) -> None:
    args = _args({"gpu": gpu, "engine": engine})
    assert args == [*DEFAULT_ARGS[:5], *parallel]


FULL_SPEC: dict[str, Any] = {
    "servedModelName": "chat",
    "gpu": {"type": "H100-80GB", "count": 2},
    "budgets": {
        "queue": {"maxRequests": 32, "maxPrefillTokens": 12000},
        "running": {"maxSeqs": 16, "maxActiveSeqs": 8},
        "tokens": {"maxBatchedTokens": 8192},
    },
    "engine": {
        "maxModelLen": 8192,
        "gpuMemoryUtilization": 0.92,
        "enableChunkedPrefill": False,
        "enablePrefixCaching": True,
        "schedulingPolicy": "fcfs",
        "kvCacheDtype": "auto",
        "pipelineParallelSize": 2,
        "extraArgs": ["--enforce-eager", "--long-prefill-token-threshold", "512"],
    },
}
FULL_ARGS = [
    "Qwen/Qwen2.5-7B-Instruct",
    "--served-model-name", "chat",
    "--port", "8000",
    "--shutdown-timeout", "60",
    "--tensor-parallel-size", "1",
    "--pipeline-parallel-size", "2",
    "--max-model-len", "8192",
    "--gpu-memory-utilization", "0.92",
    "--kv-cache-dtype", "auto",
    "--disable-chunked-prefill",
    "--enable-prefix-caching",
    "--scheduling-policy", "fcfs",
    "--max-num-queued-reqs", "32",
    "--max-num-queued-tokens", "12000",
    "--max-num-seqs", "16",
    "--max-num-active-seqs", "8",
    "--max-num-batched-tokens", "8192",
    "--enforce-eager", "--long-prefill-token-threshold", "512",
]  # fmt: skip


def test_full_order() -> None:
    assert _args(FULL_SPEC) == FULL_ARGS


def test_every_typed_flag_is_one_that_extra_args_may_not_repeat() -> None:
    typed = _args({**FULL_SPEC, "engine": {**FULL_SPEC["engine"], "extraArgs": []}})
    flags_used = [a for a in typed if a.startswith("-")]
    assert len(flags_used) == 16
    owned = [flags.flag_pattern(f.spellings) for f in rules.OWNED_FLAGS]
    for flag in flags_used:
        assert any(re.search(pattern, flag) for pattern in owned), flag


def test_overrides_replace_spec_budgets_and_fill_unset_ones() -> None:
    overrides = BudgetValues(max_active_seqs=4, max_requests=64)
    args = _args(FULL_SPEC, overrides)
    expected = list(FULL_ARGS)
    expected[expected.index("--max-num-queued-reqs") + 1] = "64"
    expected[expected.index("--max-num-active-seqs") + 1] = "4"
    assert args == expected
    assert _args({}, BudgetValues(max_seqs=32)) == [*DEFAULT_ARGS, "--max-num-seqs", "32"]
    assert _args({}, BudgetValues()) == DEFAULT_ARGS


def test_overrides_that_break_a_rule_are_refused() -> None:
    with pytest.raises(RenderError) as info:
        _args(FULL_SPEC, BudgetValues(max_active_seqs=32))
    assert str(info.value) == (
        "status.tuning.overrides: tuned budgets break a rule: "
        "spec.budgets.running.maxActiveSeqs must be <= spec.budgets.running.maxSeqs"
    )


def test_model_with_yaml_specials_stays_one_arg() -> None:
    assert _args({"model": "/models/a:b#c&*x"})[0] == "/models/a:b#c&*x"


def test_effective_status_is_the_wire_form_of_what_was_rendered() -> None:
    svc = _svc({"spec": {**FULL_SPEC, "image": "registry.local/vllm:0.33.0"}})
    cfg = load_operator_config({})
    rendered = render_all(svc, cfg, BudgetValues(max_seqs=24))
    spec_hash = rendered.manifests[0]["spec"]["template"]["metadata"]["labels"][
        "serving.vllmop.io/spec-hash"
    ]
    assert rendered.effective_status() == {
        "args": [a if a != "16" else "24" for a in FULL_ARGS],
        "image": "registry.local/vllm:0.33.0",
        "budgets": {
            "maxRequests": 32,
            "maxPrefillTokens": 12000,
            "maxSeqs": 24,
            "maxActiveSeqs": 8,
            "maxBatchedTokens": 8192,
        },
        "tensorParallelSize": 1,
        "pipelineParallelSize": 2,
        "specHash": spec_hash,
    }
    # no spec.image: status names the operator's default image, which the pods run
    default = render_all(_svc({}), cfg)
    template = default.manifests[0]["spec"]["template"]
    assert template["spec"]["containers"][0]["image"] == "vllm/vllm-openai:v0.33.0"
    assert default.effective_status() == {
        "args": DEFAULT_ARGS,
        "image": "vllm/vllm-openai:v0.33.0",
        "budgets": {},
        "tensorParallelSize": 1,
        "pipelineParallelSize": 1,
        "specHash": template["metadata"]["labels"]["serving.vllmop.io/spec-hash"],
    }


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("Auto", BudgetValues(max_active_seqs=8)),
        ("Recommend", BudgetValues()),
        ("Off", BudgetValues()),
    ],
)
def test_overrides_from_status_only_in_auto_mode(mode: str, expected: BudgetValues) -> None:
    svc = _svc(
        {
            "spec": {"autotune": {"mode": mode}},
            "status": {"tuning": {"overrides": {"maxActiveSeqs": 8}, "desiredReplicas": 3}},
        }
    )
    assert overrides_from_status(svc) == expected


def test_overrides_from_status_without_status_or_autotune() -> None:
    assert overrides_from_status(_svc({})) == BudgetValues()
    auto_without_status = _svc({"spec": {"autotune": {"mode": "Auto"}}})
    assert overrides_from_status(auto_without_status) == BudgetValues()


@pytest.mark.parametrize(
    ("extra", "env", "message"),
    [
        (["--enable-auto-tool-choice"], [], "requires --tool-call-parser"),
        (["--grpc-port", "9000"], [], "requires VLLM_USE_RUST_FRONTEND=1"),
        (["--reasoning-effort-map", '{"huge": "x"}'], [], "unknown efforts ['huge']"),
        (["--enable-log-outputs"], [], "requires --enable-log-requests"),
        # dotted options: vLLM's parser turns them into JSON for the option before argparse
        (["--compilation-config.bogus=1"], [], 'extraArgs[0]: "--compilation-config.bogus=1"'),
        (["--enforce-eager.x=1"], [], """unrecognized arguments: '{"x": 1}'"""),
        (["--dtype", "half", "--kv-cache-memory-bytes.a", "1"], [], "extraArgs[2]"),
        (["--compilation-config.mode"], [], "a dotted option expects one argument"),
        (["--compilation-config.mode=3", "--enable-auto-tool-choice"], [], "tool-call-parser"),
        # create_engine_config's Platform.validate_environ, with its hard fail on
        (
            ["--fail-on-environ-validation"],
            [{"name": "VLLM_ATTENTON_BACKEND", "value": "x"}],
            "Unknown vLLM environment variable detected: VLLM_ATTENTON_BACKEND",
        ),
        (
            ["--fail-on-environ-validation"],
            [{"name": "VLLM_X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            "detected: VLLM_X",
        ),
    ],
)
def test_extra_args_vllm_serve_exits_on_are_refused_before_the_pod(
    extra: list[str], env: list[dict[str, str]], message: str
) -> None:
    """`vllm serve` checks its parsed args before it loads anything (serve_checks.py): a spec
    whose pods would crash-loop on them is not rendered."""
    with pytest.raises(RenderError, match=re.escape(message)):
        _args({"engine": {"extraArgs": extra, "env": env}})


@pytest.mark.parametrize(
    ("extra", "env"),
    [
        (["--enable-auto-tool-choice", "--tool-call-parser", "hermes"], []),
        (["--chat-template", "{{ messages }}"], []),
        (["--grpc-port", "9000"], [{"name": "VLLM_USE_RUST_FRONTEND", "value": "1"}]),
        (["--reasoning-effort-map", '{"high": "max"}'], []),
        # a path in the pod (a mounted template): the operator cannot look it up
        (["--chat-template", "/templates/chat.jinja"], []),
        (
            ["--grpc-port", "9000"],
            [
                {
                    "name": "VLLM_USE_RUST_FRONTEND",
                    "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}},
                }
            ],
        ),
        (["--no-enable-auto-tool-choice"], []),
        (["--fail-on-environ-validation"], [{"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"}]),
        (["--no-fail-on-environ-validation"], [{"name": "VLLM_X", "value": "1"}]),
        (["--compilation-config.mode", "3", "--compilation-config.cudagraph_mode=FULL"], []),
        (
            [
                "--kv-transfer-config.kv_connector=NixlConnector",
                "--kv-transfer-config.kv_role=kv_both",
                "-O",
                "2",
            ],
            [],
        ),
    ],
)
def test_extra_args_vllm_serve_takes_are_rendered(
    extra: list[str], env: list[dict[str, str]]
) -> None:
    assert _args({"engine": {"extraArgs": extra, "env": env}})[-len(extra) :] == extra
