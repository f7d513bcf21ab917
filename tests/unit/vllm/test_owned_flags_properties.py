"""Property tests: no spelling vLLM 0.33 accepts for an owned flag gets through extraArgs.

Hypothesis generates spellings of every owned flag the way users (and attackers) write them:
unique prefixes, `=value`, `.key=value`, `_` for `-`, upper case. Whatever vLLM's resolution
(vllm_operator.vllm.options, proven against vLLM's parser by the parity tier) reads as an owned
flag is refused by the pydantic model and by the renderer; the CEL regex agrees with it exactly.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_operator.api import flags
from vllm_operator.api.errors import InvalidSpecError, parse_vllmservice
from vllm_operator.api.spec import EngineSpec, GPUSpec, VLLMServiceSpec
from vllm_operator.render import build_args
from vllm_operator.render.errors import RenderError
from vllm_operator.vllm.options import resolve_dest

SETTINGS = settings(
    derandomize=True,
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@st.composite
def spellings(draw: st.DrawFn) -> tuple[flags.OwnedFlag, str]:
    owned = draw(st.sampled_from(flags.OWNED_FLAGS))
    spelling = draw(st.sampled_from(owned.spellings))
    cut = draw(st.integers(min_value=2, max_value=len(spelling)))
    name = spelling[:cut]
    if name.startswith("--"):
        body = "".join(draw(st.sampled_from(["-", "_"])) if ch == "-" else ch for ch in name[2:])
        name = "--" + body
    if draw(st.booleans()):
        name = name.upper() if draw(st.booleans()) else name.capitalize()
    suffix = draw(st.sampled_from(["", "=4096", "=", ".x=1", "=a b", "=--port"]))
    return owned, name + suffix


def _svc(extra_args: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "serving.vllmop.io/v1alpha1",
        "kind": "VLLMService",
        "metadata": {"name": "prop", "namespace": "default"},
        "spec": {
            "model": "Qwen/Qwen2.5-0.5B-Instruct",
            "gpu": {"type": "L4"},
            "engine": {"extraArgs": extra_args},
        },
    }


def _refused_by_model(args: list[str]) -> list[str]:
    try:
        parse_vllmservice(_svc(args))
    except InvalidSpecError as exc:
        return exc.messages
    return []


def _refused_by_renderer(args: list[str]) -> str | None:
    # built without validators: the renderer must refuse on its own
    spec = VLLMServiceSpec.model_construct(
        model="m",
        served_model_name=None,
        gpu=GPUSpec(type="L4"),
        budgets=None,
        engine=EngineSpec.model_construct(extra_args=args),
    )
    try:
        build_args(spec)
    except RenderError as exc:
        return str(exc)
    return None


@SETTINGS
@given(spellings(), st.integers(min_value=0, max_value=3))
def test_owned_spellings_are_refused_by_the_model_and_the_renderer(
    case: tuple[flags.OwnedFlag, str], position: int
) -> None:
    owned, token = case
    args = ["--enforce-eager"] * position + [token]
    reads_as_owned = resolve_dest(token) == owned.vllm.dest
    model_says = _refused_by_model(args)
    renderer_says = _refused_by_renderer(args)
    if reads_as_owned:
        assert owned.message(position, token) in model_says
        assert (
            renderer_says
            == f"spec.engine.extraArgs[{position}]: "
            + (owned.message(position, token).split(": ", 1)[1])
        )
    else:
        # not the owned flag for vLLM either: never refused *as* that flag
        assert owned.message(position, token) not in model_says


@SETTINGS
@given(spellings())
def test_the_cel_regex_matches_exactly_what_vllm_resolves(
    case: tuple[flags.OwnedFlag, str],
) -> None:
    owned, token = case
    cel = re.search(owned.pattern.removesuffix("$") + r"\Z", token) is not None
    assert cel == (resolve_dest(token) == owned.vllm.dest)


@pytest.mark.parametrize("owned", flags.OWNED_FLAGS, ids=lambda f: f.flag)
def test_every_spelling_and_each_unique_prefix_is_refused(owned: flags.OwnedFlag) -> None:
    for spelling in owned.spellings:
        for cut in range(2, len(spelling) + 1):
            token = spelling[:cut] + "=1"
            if resolve_dest(token) == owned.vllm.dest:
                assert _refused_by_model([token]) == [owned.message(0, token)]
    assert resolve_dest(owned.flag) == owned.vllm.dest
