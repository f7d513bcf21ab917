"""Parity with vLLM 0.33.0 itself: its argument parser and its SchedulerConfig / CacheConfig.

The operator renders `vllm serve` argv and refuses some specs on vLLM's behalf. Here the real
vLLM 0.33.0 (a separate venv from e2e/vllm-ref-venv.sh, cached) judges the same argv through
tests/parity/vllm_probe.py, in one subprocess for every case (importing vLLM takes ~10 s):

* every examples/*.yaml, rendered by the operator, is accepted by vLLM, and vLLM's parsed and
  resolved values are the spec's budgets and engine settings;
* for each cross-field rule the CRD takes from vLLM, a spec just past the line is refused by the
  project (with the project's message) and by vLLM (with vLLM's), and one just inside is
  accepted by both;
* every spelling the CRD reserves for a typed field is a flag vLLM knows, and every knob it
  refuses as "does not exist in vLLM 0.33" is one vLLM's parser refuses too.

A venv that cannot be installed fails the tests with the install script's message.
docs/parity.md explains the method and its limits.
"""

from __future__ import annotations

import contextlib
import io
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from tests.fixtures.specs.cases import merge_patch
from tests.parity.gen_options import ReferenceError, run_probe
from vllm_operator.api import flags, rules
from vllm_operator.api.budgets import BUDGET_FIELDS
from vllm_operator.api.errors import InvalidSpecError, parse_vllmservice
from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.config import load_operator_config
from vllm_operator.constants import DEFAULT_IMAGE, VLLM_VERSION
from vllm_operator.render import build_args, compute_parallel_sizes, render_all
from vllm_operator.render.args import checked_extra_args
from vllm_operator.render.errors import RenderError
from vllm_operator.vllm.defaults import batch_defaults
from vllm_operator.vllm.rules import SchedulerLimitError, check_limits, resolve_batch_limits
from vllm_operator.vllm.values import given_values
from vllm_twin.argv import ArgvError, parse_vllm_argv

# A cold reference venv downloads ~3 GB (~3 min at 35 MB/s); the fixture's first user waits.
pytestmark = pytest.mark.timeout(1800)

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
CFG = load_operator_config({})

# max_position_embeddings in each model's config.json on the Hugging Face Hub: the context
# length vLLM derives when spec.engine.maxModelLen is unset (the probe downloads no model).
MODEL_MAX_LEN = {
    "Qwen/Qwen2.5-0.5B-Instruct": 32768,
    "Qwen/Qwen2.5-3B-Instruct": 32768,
    "Qwen/Qwen2.5-7B-Instruct": 32768,
    "meta-llama/Llama-3.3-70B-Instruct": 131072,
}


def _flag_dest(flag: str) -> str:
    """argparse's dest for a long flag: --max-num-seqs -> max_num_seqs."""
    return flag.removeprefix("--").replace("-", "_")


# ---- cases: each becomes one entry of the single probe run ----------------------------------


@dataclass(frozen=True)
class ProbeCase:
    id: str
    argv: list[str]
    device: str | dict[str, Any]  # a probe device class, or the catalog's GPU
    model_max_len: int | None = None

    def to_json(self) -> dict[str, Any]:
        case: dict[str, Any] = {"argv": self.argv, "device": self.device}
        if self.model_max_len is not None:
            case["model_max_len"] = self.model_max_len
        return case


def _device(gpu_type: str) -> dict[str, Any]:
    """The GPU as the operator's catalog knows it; vLLM picks its defaults by memory and name.

    The catalog's product label is the device name with dashes (NVIDIA-H100-80GB-HBM3); the
    compute capability is not in the catalog and only matters for GB10.
    """
    gpu = CFG.gpu_catalog.get(gpu_type)
    assert gpu is not None, f"{gpu_type} is not in the operator's GPU catalog"
    product = next(iter(gpu.node_labels.values()))
    return {"name": product.replace("-", " "), "memory_gib": gpu.memory_gib, "capability": None}


def _probe_case(case_id: str, spec: VLLMServiceSpec, argv: list[str]) -> ProbeCase:
    engine = spec.engine
    model_max_len = None
    if engine is None or engine.max_model_len is None:
        assert spec.model in MODEL_MAX_LEN, (
            f"{case_id}: add {spec.model}'s max_position_embeddings to MODEL_MAX_LEN"
        )
        model_max_len = MODEL_MAX_LEN[spec.model]
    return ProbeCase(case_id, argv, _device(spec.gpu.type), model_max_len)


@dataclass(frozen=True)
class Example:
    name: str
    spec: VLLMServiceSpec
    container: dict[str, Any]


def _load_example(path: Path) -> Example:
    svc = parse_vllmservice(yaml.safe_load(path.read_text(encoding="utf-8")))
    deployment = next(m for m in render_all(svc, CFG).manifests if m["kind"] == "Deployment")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    container = next(c for c in containers if c["name"] == "vllm")
    return Example(path.stem, svc.spec, container)


EXAMPLE_CASES = {path.stem: _load_example(path) for path in EXAMPLES}


def _unvalidated(model_cls: type[BaseModel], data: dict[str, Any]) -> Any:
    """`data` (wire names) as `model_cls` without running any validator: the spec the renderer
    would get if the project let a rule-breaking spec through."""
    values: dict[str, Any] = {}
    for name, info in model_cls.model_fields.items():
        key = info.alias or name
        if key not in data:
            continue
        value = data[key]
        nested = [
            t
            for t in (info.annotation, *typing.get_args(info.annotation))
            if isinstance(t, type) and issubclass(t, BaseModel)
        ]
        values[name] = (
            _unvalidated(nested[0], value) if nested and isinstance(value, dict) else value
        )
    return model_cls.model_construct(**values)


BASE_SPEC: dict[str, Any] = {"model": "Qwen/Qwen2.5-7B-Instruct", "gpu": {"type": "H100-80GB"}}


@dataclass(frozen=True)
class RuleCase:
    id: str
    patch: dict[str, Any]  # merged into BASE_SPEC
    project_message: str | None  # the project's one-line refusal; None = accepted
    vllm_error: str | None  # a substring of vLLM's refusal; None = accepted
    spec: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "spec", merge_patch(BASE_SPEC, self.patch))


ACTIVE_SEQS_MESSAGE = "spec.budgets.running.maxActiveSeqs must be <= spec.budgets.running.maxSeqs"
BATCHED_SEQS_MESSAGE = (
    "spec.budgets.tokens.maxBatchedTokens must be >= spec.budgets.running.maxSeqs"
)
BATCHED_LEN_MESSAGE = (
    "spec.budgets.tokens.maxBatchedTokens must be >= spec.engine.maxModelLen"
    " when spec.engine.enableChunkedPrefill is false"
)

RULE_CASES = [
    # max_num_active_seqs <= max_num_seqs (vllm/config/scheduler.py, verify_max_model_len)
    RuleCase(
        "active-seqs-equal-seqs",
        {
            "engine": {"maxModelLen": 8192},
            "budgets": {"running": {"maxSeqs": 64, "maxActiveSeqs": 64}},
        },
        None,
        None,
    ),
    RuleCase(
        "active-seqs-above-seqs",
        {
            "engine": {"maxModelLen": 8192},
            "budgets": {"running": {"maxSeqs": 64, "maxActiveSeqs": 65}},
        },
        ACTIVE_SEQS_MESSAGE,
        "max_num_active_seqs (65) cannot be greater than max_num_seqs (64).",
    ),
    # max_num_batched_tokens >= max_num_seqs, both set
    RuleCase(
        "batched-tokens-equal-seqs",
        {
            "engine": {"maxModelLen": 8192},
            "budgets": {"running": {"maxSeqs": 256}, "tokens": {"maxBatchedTokens": 256}},
        },
        None,
        None,
    ),
    RuleCase(
        "batched-tokens-below-seqs",
        {
            "engine": {"maxModelLen": 8192},
            "budgets": {"running": {"maxSeqs": 256}, "tokens": {"maxBatchedTokens": 255}},
        },
        BATCHED_SEQS_MESSAGE,
        "max_num_batched_tokens (255) must be greater than or equal to max_num_seqs (256).",
    ),
    # max_num_batched_tokens >= max_model_len when chunked prefill is off
    RuleCase(
        "batched-tokens-equal-model-len-chunked-prefill-off",
        {
            "engine": {"maxModelLen": 4096, "enableChunkedPrefill": False},
            "budgets": {"tokens": {"maxBatchedTokens": 4096}},
        },
        None,
        None,
    ),
    RuleCase(
        "batched-tokens-below-model-len-chunked-prefill-off",
        {
            "engine": {"maxModelLen": 4096, "enableChunkedPrefill": False},
            "budgets": {"tokens": {"maxBatchedTokens": 4095}},
        },
        BATCHED_LEN_MESSAGE,
        "max_num_batched_tokens (4095) is smaller than max_model_len (4096).",
    ),
    RuleCase(  # the rule's condition: with chunked prefill on, a smaller budget is fine
        "batched-tokens-below-model-len-chunked-prefill-on",
        {
            "engine": {"maxModelLen": 4096, "enableChunkedPrefill": True},
            "budgets": {"tokens": {"maxBatchedTokens": 4095}},
        },
        None,
        None,
    ),
]


def _rule_argv(case: RuleCase) -> list[str]:
    """What the renderer makes of the spec, validated or not."""
    return build_args(_unvalidated(VLLMServiceSpec, case.spec))


# A value vLLM accepts for each flag the CRD reserves (None: a bare boolean flag).
FLAG_VALUES: dict[str, str | None] = {
    "--model": "Qwen/Qwen2.5-7B-Instruct",
    flags.FLAG_SERVED_MODEL_NAME: "chat",
    flags.FLAG_PORT: "8000",
    "--hf-token": "hf_example",
    "--api-key": "s3cret",
    flags.FLAG_TP: "1",
    flags.FLAG_PP: "1",
    flags.FLAG_MAX_MODEL_LEN: "8192",
    flags.FLAG_GPU_MEM: "0.9",
    flags.FLAG_KV_CACHE_DTYPE: "auto",
    flags.FLAG_CHUNKED_PREFILL: None,
    flags.FLAG_PREFIX_CACHING: None,
    flags.FLAG_SCHEDULING_POLICY: "fcfs",
    flags.FLAG_SHUTDOWN_TIMEOUT: "60",
    flags.FLAG_MAX_QUEUED_REQS: "64",
    flags.FLAG_MAX_QUEUED_TOKENS: "8192",
    flags.FLAG_MAX_SEQS: "64",
    flags.FLAG_MAX_ACTIVE_SEQS: "32",
    flags.FLAG_MAX_BATCHED_TOKENS: "8192",
}


def _spelling_cases() -> dict[str, ProbeCase]:
    h100 = _device("H100-80GB")
    cases = {}
    for owned in rules.OWNED_FLAGS:
        value = FLAG_VALUES.get(owned.flag, "missing")
        for spelling in owned.spellings:
            takes_value = value is not None and spelling not in owned.negatives
            # --model replaces the positional model (FlexibleArgumentParser moves it there).
            positional = [] if owned.flag == "--model" else ["Qwen/Qwen2.5-7B-Instruct"]
            argv = [*positional, spelling, *([value] if takes_value else [])]
            cases[f"owned:{spelling}"] = ProbeCase(f"owned:{spelling}", argv, h100, 32768)
    for knob in flags.REMOVED_KNOBS:
        for spelling in knob.spellings:
            argv = ["Qwen/Qwen2.5-7B-Instruct", spelling, "8"]
            cases[f"removed:{spelling}"] = ProbeCase(f"removed:{spelling}", argv, h100, 32768)
    return cases


# docs/vllm-0.33.md §1.3: `vllm serve` defaults (max_num_seqs, max_num_batched_tokens) by device,
# for every GPU of the operator's catalog, plus two the probe names itself (B200's >= 160 GiB
# tier; GB10, kept on the small tier by its compute capability 12.1 despite 120 GiB).
DEFAULTS_TABLE: dict[str, tuple[int, int]] = {
    "H100-80GB": (1024, 8192),
    "H200-141GB": (1024, 8192),
    "A100-80GB": (256, 2048),
    "A100-40GB": (256, 2048),
    "L40S": (256, 2048),
    "L4": (256, 2048),
    "T4": (256, 2048),
    "MI300X": (1024, 16384),
    "b200": (1024, 16384),
    "gb10": (256, 2048),
}


# extraArgs vLLM's parser takes or exits on by their values and arity (vllm_operator.vllm.values):
# each alone and each pair, after the rendered args of a plain spec
EXTRA_ARGS_VOCABULARY: tuple[tuple[str, ...], ...] = (
    ("--dtype", "half"),
    ("--dtype", "fp16"),
    ("--dtype=bfloat16",),
    ("--dty", "float16"),
    ("--dtype",),
    ("--seed", "7"),
    ("--seed", "x"),
    ("--seed=-3",),
    ("--seed", "-3"),
    ("--seed=",),
    ("--seed", "1_000"),
    ("--enforce-eager",),
    ("--enforce-eager=1",),
    ("--no-enforce-eager",),
    ("--uvicorn-log-level", "loud"),
    ("--uvicorn-log-level", "warning"),
    ("--cpu-offload-gb", "1.5"),
    ("--cpu-offload-gb", "lots"),
    ("--cudagraph-capture-sizes", "1", "2", "4"),
    ("--cudagraph-capture-sizes", "1", "two"),
    ("--cudagraph-capture-sizes",),
    ("--safetensors-prefetch-block-size", "8k"),
    ("--safetensors-prefetch-block-size", "8kb"),
    ("stray",),
    ("--", "stray"),
    ("-O3",),
    ("-O", "3"),
    ("-O", "5"),
    ("--compilation-config.mode=3",),
    ("--help",),
    ("-h",),
    ("--trust-remote-code=false",),
    ("--",),
    ("--kv-cache-memory-bytes", "None"),
    ("--kv-cache-memory-bytes", "8G"),
    ("--kv-cache-memory-bytes={}",),
    ("--num-gpu-blocks-override", ""),
    ("--num-gpu-blocks-override", "x"),
)


def _extra_args_cases() -> dict[str, tuple[list[str], ProbeCase]]:
    spec = _hardware_spec("H100-80GB", {})
    base = build_args(spec)
    singles = [list(v) for v in EXTRA_ARGS_VOCABULARY]
    pairs = [a + b for a in singles for b in singles[::3] if a != b]
    cases = {}
    for extra in singles + pairs:
        case_id = "extra:" + " ".join(extra)
        cases[case_id] = (extra, _probe_case(case_id, spec, [*base, *extra]))
    return cases


def _defaults_cases() -> dict[str, ProbeCase]:
    cases = {}
    for gpu in DEFAULTS_TABLE:
        device: str | dict[str, Any] = _device(gpu) if gpu in CFG.gpu_catalog.types else gpu
        argv = ["Qwen/Qwen2.5-7B-Instruct", flags.FLAG_MAX_MODEL_LEN, "32768"]
        cases[f"defaults:{gpu}"] = ProbeCase(f"defaults:{gpu}", argv, device)
    return cases


# Budgets checked against vLLM's per-GPU defaults (render/hardware.py): just inside and just past.
HARDWARE_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "l4-seqs-at-default-budget": ("L4", {"running": {"maxSeqs": 2048}}),
    "l4-seqs-past-default-budget": ("L4", {"running": {"maxSeqs": 2049}}),
    "l4-active-at-default-seqs": ("L4", {"running": {"maxActiveSeqs": 256}}),
    "l4-active-past-default-seqs": ("L4", {"running": {"maxActiveSeqs": 257}}),
    "a100-active-past-default-seqs": ("A100-80GB", {"running": {"maxActiveSeqs": 257}}),
    "h100-seqs-at-default-budget": ("H100-80GB", {"running": {"maxSeqs": 8192}}),
    "h100-seqs-past-default-budget": ("H100-80GB", {"running": {"maxSeqs": 8193}}),
    "h100-active-at-clamped-seqs": (
        "H100-80GB",
        {"running": {"maxActiveSeqs": 512}, "tokens": {"maxBatchedTokens": 512}},
    ),
    "h100-active-past-clamped-seqs": (
        "H100-80GB",
        {"running": {"maxActiveSeqs": 513}, "tokens": {"maxBatchedTokens": 512}},
    ),
}


def _hardware_spec(gpu: str, budgets: dict[str, Any]) -> VLLMServiceSpec:
    return VLLMServiceSpec.model_validate(
        {"model": "Qwen/Qwen2.5-7B-Instruct", "gpu": {"type": gpu}, "budgets": budgets}
    )


def _all_probe_cases() -> list[ProbeCase]:
    cases = [
        _probe_case(f"example:{name}", ex.spec, ex.container["args"])
        for name, ex in EXAMPLE_CASES.items()
    ]
    for rule_case in RULE_CASES:
        spec = _unvalidated(VLLMServiceSpec, rule_case.spec)
        cases.append(_probe_case(f"rule:{rule_case.id}", spec, _rule_argv(rule_case)))
    cases.extend(_spelling_cases().values())
    cases.extend(case for _, case in _extra_args_cases().values())
    cases.extend(_defaults_cases().values())
    for case_id, (gpu, budgets) in HARDWARE_CASES.items():
        spec = _hardware_spec(gpu, budgets)
        cases.append(_probe_case(f"hardware:{case_id}", spec, build_args(spec)))
    return cases


# ---- fixtures ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeAnswer:
    vllm: str
    results: dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def probed(vllm_python: str) -> ProbeAnswer:
    """One probe run for every case of this module."""
    cases = _all_probe_cases()
    try:
        answer = run_probe(vllm_python, [], [c.to_json() for c in cases])
    except ReferenceError as exc:
        pytest.fail(str(exc), pytrace=False)
    assert len(answer["results"]) == len(cases)
    return ProbeAnswer(
        answer["vllm"], {c.id: r for c, r in zip(cases, answer["results"], strict=True)}
    )


# ---- tests ------------------------------------------------------------------------------------


def test_reference_vllm_is_the_version_the_operator_deploys(probed: ProbeAnswer) -> None:
    assert (probed.vllm, DEFAULT_IMAGE) == (VLLM_VERSION, f"vllm/vllm-openai:v{probed.vllm}")


def _budgets_from_spec(spec: VLLMServiceSpec) -> dict[str, int | None]:
    budgets = spec.budgets
    out: dict[str, int | None] = {}
    for f in BUDGET_FIELDS:
        group = None if budgets is None else getattr(budgets, f.group)
        out[_flag_dest(f.flag)] = None if group is None else getattr(group, f.attr)
    return out


def _assert_budgets_match(spec: VLLMServiceSpec, parsed: dict[str, Any]) -> None:
    """Flags the spec sets parse to its values and survive into SchedulerConfig; budgets it
    leaves unset are not passed (vLLM's own defaults apply)."""
    expected = _budgets_from_spec(spec)
    assert {k: parsed["cli"][k] for k in expected} == expected
    set_values = {k: v for k, v in expected.items() if v is not None}
    assert {k: parsed["scheduler"][k] for k in set_values} == set_values


@pytest.mark.parametrize("name", sorted(EXAMPLE_CASES))
def test_example_args_are_accepted_by_vllm_with_the_spec_values(
    name: str, probed: ProbeAnswer
) -> None:
    example = EXAMPLE_CASES[name]
    spec = example.spec
    assert "command" not in example.container, "the image's entrypoint is `vllm serve`"
    assert example.container["image"] == DEFAULT_IMAGE
    result = probed.results[f"example:{name}"]
    assert (result["accepted"], result["stage"], result["error"]) == (True, None, None)
    parsed = result["parsed"]
    _assert_budgets_match(spec, parsed)

    engine = spec.engine
    tp, pp = compute_parallel_sizes(spec)
    expected = {
        "model": spec.model,
        "served_model_name": None if spec.served_model_name is None else [spec.served_model_name],
        "port": 8000,
        "tensor_parallel_size": tp,
        "pipeline_parallel_size": pp,
    }
    actual = {k: parsed["cli"][k] for k in expected}
    if engine is not None:  # each setting the spec makes, where vLLM keeps it after resolving
        resolved = {
            "max_model_len": parsed["cli"]["max_model_len"],
            "gpu_memory_utilization": parsed["cache"]["gpu_memory_utilization"],
            "kv_cache_dtype": parsed["cache"]["cache_dtype"],
            "enable_chunked_prefill": parsed["scheduler"]["enable_chunked_prefill"],
            "enable_prefix_caching": parsed["cache"]["enable_prefix_caching"],
            "scheduling_policy": parsed["scheduler"]["policy"],
        }
        for key, value in resolved.items():
            if getattr(engine, key) is not None:
                expected[key] = getattr(engine, key)
                actual[key] = value
    assert actual == expected


@pytest.mark.parametrize("case", RULE_CASES, ids=lambda c: c.id)
def test_cross_field_rule_agrees_with_vllm(case: RuleCase, probed: ProbeAnswer) -> None:
    obj = {
        "apiVersion": "serving.vllmop.io/v1alpha1",
        "kind": "VLLMService",
        "metadata": {"name": "parity", "namespace": "default"},
        "spec": case.spec,
    }
    result = probed.results[f"rule:{case.id}"]
    if case.project_message is None:
        spec = parse_vllmservice(obj).spec
        assert (result["accepted"], result["error"]) == (True, None)
        # The unvalidated spec the probe got renders exactly like the validated one.
        assert _rule_argv(case) == build_args(spec)
        _assert_budgets_match(spec, result["parsed"])
        return
    with pytest.raises(InvalidSpecError) as refused:
        parse_vllmservice(obj)
    assert (refused.value.messages, result["accepted"], result["stage"]) == (
        [case.project_message],
        False,
        "config",
    )
    assert case.vllm_error is not None
    assert case.vllm_error in result["error"], result["error"]


def test_every_reserved_flag_has_a_probe_value() -> None:
    assert {owned.flag for owned in rules.OWNED_FLAGS} == set(FLAG_VALUES)


@pytest.mark.parametrize("case_id", sorted(_spelling_cases()))
def test_flag_spellings_agree_with_vllms_parser(case_id: str, probed: ProbeAnswer) -> None:
    """A spelling reserved for a typed field parses in vLLM; a refused knob is unknown to it."""
    result = probed.results[case_id]
    if case_id.startswith("owned:"):
        assert (result["accepted"], result["error"]) == (True, None)
    else:
        spelling = case_id.removeprefix("removed:")
        assert (result["accepted"], result["stage"]) == (False, "parse")
        assert f"unrecognized arguments: {spelling}" in result["error"]


@pytest.mark.parametrize("case_id", sorted(_extra_args_cases()))
def test_extra_args_are_refused_exactly_when_vllms_parser_exits(
    case_id: str, probed: ProbeAnswer
) -> None:
    extra, _ = _extra_args_cases()[case_id]
    result = probed.results[case_id]
    vllm_exits = not result["accepted"] and result["stage"] == "parse"
    try:
        checked_extra_args(extra)
        ours = None
    except RenderError as exc:
        ours = str(exc)
    assert (ours is not None) == vllm_exits, (ours, result["error"])
    if "cli" in result["parsed"]:  # what the renderer reads of --dtype is what vLLM stored
        given = given_values(extra).get("dtype")
        assert result["parsed"]["cli"]["dtype"] == ("auto" if given is None else given.value)
    # the twin, started with the same args (the e2e harness does), exits where vLLM does
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # --help prints it
            parse_vllm_argv([*build_args(_hardware_spec("H100-80GB", {})), *extra], {})
        twin = None
    except (ArgvError, SystemExit) as exc:
        twin = str(exc)
    assert (twin is not None) == vllm_exits, (twin, result["error"])


def test_catalog_covers_the_defaults_table() -> None:
    assert set(CFG.gpu_catalog.types) <= set(DEFAULTS_TABLE)


@pytest.mark.parametrize("gpu", sorted(DEFAULTS_TABLE))
def test_vllm_defaults_per_gpu_match_the_reference_table(gpu: str, probed: ProbeAnswer) -> None:
    """The hardware defaults the probe resolves are docs/vllm-0.33.md §1.3's, so the accepted cases
    above were judged with the budgets vLLM would pick on that GPU."""
    result = probed.results[f"defaults:{gpu}"]
    assert result["accepted"], result["error"]
    scheduler = result["parsed"]["scheduler"]
    actual = (scheduler["max_num_seqs"], scheduler["max_num_batched_tokens"])
    assert actual == DEFAULTS_TABLE[gpu]
    # the one copy the renderer and the engine model read (vllm_operator.vllm.defaults)
    name, memory, capability = _named_device(gpu)
    ours = batch_defaults(name, memory, capability)
    assert (ours.max_num_seqs, ours.max_num_batched_tokens) == actual


# The probe's own device classes for the two GPUs the catalog lacks.
PROBE_DEVICES = {"b200": ("NVIDIA B200", 180, (10, 0)), "gb10": ("NVIDIA GB10", 120, (12, 1))}


def _named_device(gpu: str) -> tuple[str, float, tuple[int, int] | None]:
    if gpu in PROBE_DEVICES:
        return PROBE_DEVICES[gpu]
    device = _device(gpu)
    return device["name"], device["memory_gib"], None


@pytest.mark.parametrize("case_id", sorted(HARDWARE_CASES))
def test_engine_model_resolves_the_batch_limits_vllm_resolves(
    case_id: str, probed: ProbeAnswer
) -> None:
    """The twin parses the rendered argv and the engine model's rules (vllm_operator.vllm.rules)
    accept and refuse as vLLM does, with vLLM's resolved max_num_seqs / max_num_batched_tokens."""
    gpu, budgets = HARDWARE_CASES[case_id]
    spec = _hardware_spec(gpu, budgets)
    engine = parse_vllm_argv(build_args(spec), {}).engine
    name, memory, capability = _named_device(gpu)
    chunked = engine.enable_chunked_prefill is not False
    limits = resolve_batch_limits(
        engine.max_num_batched_tokens,
        engine.max_num_seqs,
        batch_defaults(name, memory, capability),
        max_model_len=MODEL_MAX_LEN[spec.model],
        chunked_prefill=chunked,
    )
    try:
        check_limits(
            limits,
            max_num_active_seqs=engine.max_num_active_seqs,
            max_model_len=MODEL_MAX_LEN[spec.model],
            chunked_prefill=chunked,
        )
        ours = True
    except SchedulerLimitError:
        ours = False
    theirs = probed.results[f"hardware:{case_id}"]
    assert ours == theirs["accepted"], theirs
    if ours:
        scheduler = theirs["parsed"]["scheduler"]
        assert (limits.max_num_seqs, limits.max_num_batched_tokens) == (
            scheduler["max_num_seqs"],
            scheduler["max_num_batched_tokens"],
        )


@pytest.mark.parametrize("case_id", sorted(HARDWARE_CASES))
def test_budgets_against_gpu_defaults_are_refused_exactly_when_vllm_refuses(
    case_id: str, probed: ProbeAnswer
) -> None:
    from vllm_operator.render.errors import RenderError
    from vllm_operator.render.hardware import check_hardware_defaults

    gpu, budgets = HARDWARE_CASES[case_id]
    try:
        check_hardware_defaults(_hardware_spec(gpu, budgets), CFG.gpu_catalog)
        ours = True
    except RenderError:
        ours = False
    theirs = probed.results[f"hardware:{case_id}"]
    assert ours == theirs["accepted"], theirs
    assert ours == ("-past-" not in case_id)
