"""extraArgs whose values or arity make vLLM 0.33's parser exit (vllm_operator.vllm.values).

The parity tier (tests/parity/test_vllm_parity.py) holds the same verdicts against vLLM's own
parser; here they are checked without it, with the renderer's one-line message.
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.render import build_args
from vllm_operator.render.args import checked_extra_args
from vllm_operator.render.errors import RenderError
from vllm_operator.vllm.options import load_option_table
from vllm_operator.vllm.value_types import field_problem
from vllm_operator.vllm.values import first_refusal, given_values
from vllm_twin.argv import parse_vllm_argv


@pytest.mark.parametrize(
    ("extra", "index", "message"),
    [
        (["--dtype", "fp16"], 1, "argument --dtype: invalid choice: 'fp16' (choose from 'auto',"),
        (["--dtype"], 0, "argument --dtype: expected one argument"),
        (["--seed", "x"], 1, "argument --seed: invalid int value: 'x'"),
        (["--seed="], 0, "argument --seed: invalid int value: ''"),
        (["--seed", "--enforce-eager"], 0, "argument --seed: expected one argument"),
        (["--enforce-eager=1"], 0, "ignored explicit argument '1'"),
        (["--cudagraph-capture-sizes"], 0, "expected at least one argument"),
        (["--cudagraph-capture-sizes", "1", "two", "4"], 2, "invalid int value: 'two'"),
        (["--safetensors-prefetch-block-size", "8kb"], 1, "invalid human_readable_int value"),
        (["--seed", "1", "2"], 2, "unrecognized arguments: '2'"),
        (["--", "x"], 0, "unrecognized arguments: '--'"),
        (["--"], 0, "unrecognized arguments: '--'"),
        (["--num-gpu-blocks-override", "x"], 1, "Value x cannot be converted to int."),
        # every option's type is vLLM's (value_types.py): its optional ones, JSON, config
        # objects and the keys they take, backend names and their choices, LoRA modules
        (["--video-pruning-rate", "true"], 1, "Value true cannot be converted to float."),
        (["--allowed-headers", "1k"], 1, "invalid loads value: '1k'"),
        (["--kv-transfer-config", "0.5"], 1, "a config object must be a JSON object"),
        (["--compilation-config", '{"a": 1}'], 1, "unknown keys ['a']"),
        # a config field's value, by pydantic-core with the schema vLLM's config class uses
        (["--kv-transfer-config", '{"kv_connector": 3}'], 1, "kv_connector: Input should be a"),
        (["--structured-outputs-config.backend=xgrammr"], 0, "backend: Input should be 'auto'"),
        (["--seed", "1", "-cc.cudagraph_capture_sizes", '[1, "x"]'], 2, "valid integer"),
        (["--compilation-config.decoder_replay_trim_threshold=-1"], 0, "greater than or equal"),
        (["--moe-backend", "no-such"], 1, "invalid choice: 'no_such'"),
        (["--lora-modules", "none"], 1, "Invalid JSON format for --lora-modules: none"),
        (["--reasoning-effort-map", "{x"], 1, "invalid loads value"),
        (["--help"], 0, "'--help': vllm serve prints its help and exits"),
    ],
)
def test_what_vllm_exits_on(extra: list[str], index: int, message: str) -> None:
    refusal = first_refusal(extra)
    assert refusal is not None and refusal.index == index
    assert message in refusal.message


@pytest.mark.parametrize(
    "extra",
    [
        ["--dtype", "half"],
        ["--dtype=bfloat16"],
        ["--seed", "-3"],
        ["--seed", "1_000"],
        ["--enforce-eager", "--no-enforce-eager"],
        ["--cudagraph-capture-sizes", "1", "2", "4", "--seed", "1"],
        ["-O3"],
        ["-O", "3"],
        ["--compilation-config.mode=3"],
        ["--compilation-config.mode", "3"],
        ["--num-gpu-blocks-override", "None"],
        ["--kv-cache-memory-bytes", ""],
        ["--kv-transfer-config", '{"kv_connector": "x", "kv_role": "kv_both", "kv_port": 14k}'],
        ["--compilation-config", '{"cudagraph_capture_sizes": [1, "2"], "backend": "eager"}'],
        ["--kv-transfer-config.kv_port=14k", "--kv-transfer-config.kv_role", "kv_both"],
        ["--collect-detailed-traces", "None"],
        ["--max-lora-rank", "320"],
        ["--moe-backend", "Flashinfer-Cutlass"],
        ["--lora-modules", "a=b", '{"name": "c", "path": "d"}'],
        ["--watermark=-0.5"],
        [],
    ],
)
def test_what_vllm_takes(extra: list[str]) -> None:
    assert first_refusal(extra) is None
    assert checked_extra_args(extra) == extra


def test_every_recorded_config_field_schema_builds_with_this_pydantic_core() -> None:
    """options.json keeps pydantic-core schemas from vLLM's venv; the operator's own
    pydantic-core must read each one, or a config value would go unchecked or crash."""
    schemas = [
        schema
        for option in load_option_table().options
        for _, schema in option.fields or ()
        if schema is not None
    ]
    assert len(schemas) > 100
    for schema in schemas:  # a schema this pydantic-core cannot read raises here
        assert (field_problem(schema, None) is None) == _takes_null(json.loads(schema)), schema


def _takes_null(schema: dict[str, Any]) -> bool:
    if schema["type"] == "union":
        return any(_takes_null(choice) for choice in schema["choices"])
    return schema["type"] in ("nullable", "none", "any")


def test_the_renderer_names_the_element_and_what_to_do() -> None:
    with pytest.raises(RenderError) as exc:
        checked_extra_args(["--enforce-eager", "--seed", "x"])
    assert str(exc.value) == (
        'spec.engine.extraArgs[2]: "x": vLLM 0.33 would exit on it (argument --seed: invalid '
        "int value: 'x'); fix or remove it"
    )


TABLE = load_option_table()
WORDS = [s for o in TABLE.options for s in o.strings if s.startswith("--")][::7]
TOKENS = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(["1", "-1", "x", "", "--", "-O", "3", "auto", "a=b", "{}", "8k"]),
    st.builds(lambda w, v: f"{w}={v}", st.sampled_from(WORDS), st.sampled_from(["1", "x", ""])),
    st.text(max_size=8),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(TOKENS, max_size=8))
def test_a_refusal_points_at_one_of_the_elements(extra: list[str]) -> None:
    refusal = first_refusal(extra)
    if refusal is not None:
        assert 0 <= refusal.index < len(extra)
        assert refusal.message and "\n" not in refusal.message
    try:
        checked_extra_args(extra)
    except RenderError:
        pass
    else:  # what the renderer passes, the walk passes
        assert refusal is None


SPEC = VLLMServiceSpec.model_validate({"model": "Qwen/Qwen2.5-7B-Instruct", "gpu": {"type": "L4"}})
ALL_STRINGS = [s for o in TABLE.options for s in o.strings if s != "--config"]
ANY_TOKEN = st.one_of(
    st.sampled_from(ALL_STRINGS),
    st.sampled_from(["1", "-1", "x", "", "--", "-O", "3", "auto", "{}", "8k", "1.5", "None"]),
    st.builds(
        lambda w, v: f"{w}={v}",
        st.sampled_from(ALL_STRINGS),
        st.sampled_from(["1", "x", "", "auto", "{}", "None"]),
    ),
)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(ANY_TOKEN, max_size=5))
def test_what_the_renderer_passes_the_twin_takes(extra: list[str]) -> None:
    """The twin starts from a pod's args (the e2e harness); both read vLLM's option list, and
    the parity tier holds each against vLLM's parser. `--config` is left out: the policy denies
    it by default and the twin refuses it by design (docs/twin.md)."""
    try:
        checked_extra_args(extra)
    except RenderError:
        return
    with contextlib.redirect_stdout(io.StringIO()):
        parse_vllm_argv([*build_args(SPEC), *extra], {})


DTYPE_TOKENS = st.one_of(
    ANY_TOKEN,
    st.sampled_from(["--dtype", "--dty", "--dtype=half", "--dtype=bfloat16", "half", "float16"]),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(DTYPE_TOKENS, max_size=6))
def test_given_values_are_what_the_parser_stores(extra: list[str]) -> None:
    """The value the renderer reads for --dtype (render/model_dtype.py) is the one argparse
    keeps: the twin's parser, built from vLLM's option list, is the reference here and vLLM's
    own parser in the parity tier."""
    try:
        checked_extra_args(extra)
    except RenderError:
        if first_refusal(extra) is not None:
            assert given_values(extra) == {}
        return
    with contextlib.redirect_stdout(io.StringIO()):
        twin = parse_vllm_argv([*build_args(SPEC), *extra], {})
    given = given_values(extra).get("dtype")
    assert twin.engine.dtype == ("auto" if given is None else given.value)


@pytest.mark.parametrize(
    ("extra", "want"),
    [
        (
            ["--dtype", "half", "--seed", "3", "--dtype=bfloat16"],
            {"dtype": (4, "bfloat16"), "seed": (3, "3")},
        ),
        (["--dty", "float16"], {"dtype": (1, "float16")}),
        (["--enforce-eager", "--seed=4"], {"seed": (1, "4")}),
        (["--dtype"], {}),  # the parser exits: nothing is stored
        (["--cudagraph-capture-sizes", "1", "2"], {}),  # several values: not a single one
    ],
)
def test_given_values(extra: list[str], want: dict[str, tuple[int, str]]) -> None:
    found = {dest: (g.index, g.value) for dest, g in given_values(extra).items()}
    assert found == want
