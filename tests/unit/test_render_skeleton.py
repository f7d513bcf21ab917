"""Built-in templates read with only their layout parsed as YAML (render/skeleton.py): the same
documents as parsing the whole text, or the whole text is parsed."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import vllm_operator.render.templates as templates
from tests.fixtures.specs.cases import GOOD_SPECS, load_cases
from tests.unit.render_support import CFG, svc
from vllm_operator.api.errors import InvalidSpecError, parse_vllmservice
from vllm_operator.render import RenderError, render_all
from vllm_operator.render.skeleton import fill, reads_the_same_in_yaml, recording, stand_in

LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

JSON_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=400)
@given(JSON_LIKE)
def test_what_it_calls_the_same_yaml_reads_as_json_does(value: Any) -> None:
    wire = json.dumps(value, ensure_ascii=True)
    if reads_the_same_in_yaml(value):
        assert yaml.load(templates._tojson(value), Loader=LOADER) == json.loads(wire)


@pytest.mark.parametrize(
    "value", [1e-05, 1e16, float("inf"), "\ud800", {"k": [0.5, "a\udfff"]}, {"k" * 1001: 1}]
)
def test_values_yaml_reads_otherwise_are_named(value: Any) -> None:
    assert not reads_the_same_in_yaml(value)


def _placeholders(*values: Any) -> tuple[list[str], list[str | None]]:
    with recording() as texts:
        marks = [stand_in(v, json.dumps(v)) for v in values]
    return marks, texts


def test_each_placeholder_gets_its_value_back() -> None:
    (a, b), texts = _placeholders({"x": [1, 2]}, "chat")
    doc = yaml.load(f"spec: {a}\nname: {b}\nlist: [{b}]", Loader=LOADER)
    assert fill(doc, texts) is None  # b used twice
    doc = yaml.load(f"spec: {a}\nname: {b}\n", Loader=LOADER)
    assert fill(doc, texts) == {"spec": {"x": [1, 2]}, "name": "chat"}


@pytest.mark.parametrize(
    "layout",
    [
        "name: prefix-{a}",  # inside a longer string
        "{a}: 1",  # a key
        "name: 1  # {a}",  # gone into a comment: missing
        "name: |\n  {a}\n",  # inside a block scalar
    ],
)
def test_a_placeholder_that_is_not_a_whole_value_means_the_whole_text(layout: str) -> None:
    (a,), texts = _placeholders("chat")
    assert fill(yaml.load(layout.format(a=a), Loader=LOADER), texts) is None


def test_a_value_yaml_reads_otherwise_means_the_whole_text() -> None:
    (a,), texts = _placeholders(1e-05)
    assert texts == [None]
    assert fill(yaml.load(f"x: {a}", Loader=LOADER), texts) is None


def test_outside_recording_tojson_writes_the_json() -> None:
    assert stand_in({"a": 1}, '{"a": 1}') is None
    assert templates._tojson({"a": [1, "b"]}) == '{"a": [1, "b"]}'


@pytest.mark.parametrize(
    "text",
    ["😀", "model-😀-x", "a\\ud83d\\ude00", "\\😀", "日本語-🚀🚀", "\\U0001f600"],
)
def test_a_character_beyond_the_basic_plane_reaches_the_manifest_as_it_is(text: str) -> None:
    """JSON writes it as a surrogate pair, which YAML refuses; tojson writes YAML's escape."""
    assert yaml.load(templates._tojson([text]), Loader=LOADER) == [text]
    service = svc({"spec": {"servedModelName": text}})
    for whole_text in (False, True):
        (deployment, *_) = _rendered(service, whole_text=whole_text)
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[args.index("--served-model-name") + 1] == text


def _rendered(service: Any, *, whole_text: bool) -> Any:
    """The manifests, or the error's message; `whole_text`: as before render/skeleton.py."""
    original = templates._layout_filled
    if whole_text:
        templates._layout_filled = lambda *_: None  # type: ignore[assignment]
    try:
        return render_all(service, CFG).manifests
    except RenderError as exc:  # TemplateOutputError too
        return f"{type(exc).__name__}: {exc}"
    finally:
        templates._layout_filled = original  # type: ignore[assignment]


@pytest.mark.parametrize("case", load_cases(GOOD_SPECS), ids=lambda c: c.name)
def test_every_good_spec_renders_as_the_whole_text_gives(case: Any) -> None:
    service = parse_vllmservice(case.obj)
    assert _rendered(service, whole_text=False) == _rendered(service, whole_text=True)


NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(
    model=NAMES,
    served=NAMES,
    utilization=st.floats(0.05, 0.99),
)
def test_strings_and_floats_of_any_kind_render_as_the_whole_text_gives(
    model: str, served: str, utilization: float
) -> None:
    patch = {"spec": {"model": model, "servedModelName": served,
                      "engine": {"gpuMemoryUtilization": utilization}}}  # fmt: skip
    try:
        service = svc(patch)
    except InvalidSpecError:
        return  # refused by the spec's rules: nothing to render
    assert _rendered(service, whole_text=False) == _rendered(service, whole_text=True)
