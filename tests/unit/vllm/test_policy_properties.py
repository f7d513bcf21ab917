"""Property tests: the policy finds denied flags in every spelling vLLM reads, and nothing else;
the renderer never passes an element vLLM 0.33 would exit on.

Spellings are generated as in test_owned_flags_properties.py (prefixes, `_` for `-`, `=value`,
case), over the deny list's flags and their negatives; free-form dash-led elements over the
alphabet flag names use. vLLM's resolution (vllm_operator.vllm.options) is the oracle: the parity
tier proves it against vLLM's own parser.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_operator.api.policy import (
    DENIED_ENV,
    DENIED_FLAGS,
    Denied,
    PolicyConfig,
    denied_flag_pattern,
    find_policy_violations,
)
from vllm_operator.api.spec import EngineSpec, EnvVar, GPUSpec, VLLMServiceSpec
from vllm_operator.render import build_args
from vllm_operator.render.errors import RenderError
from vllm_operator.vllm.options import load_option_table, resolve_token

SETTINGS = settings(
    derandomize=True,
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TABLE = load_option_table()
IMAGE = "vllm/vllm-openai:v0.33.0"


def _spec(extra_args: list[str], env: list[EnvVar] | None = None) -> VLLMServiceSpec:
    # built without validators, as a spec that took another path to the renderer would be
    return VLLMServiceSpec.model_construct(
        model="m",
        served_model_name=None,
        image=None,
        gpu=GPUSpec(type="L4"),
        budgets=None,
        engine=EngineSpec.model_construct(extra_args=extra_args, env=env or []),
    )


@st.composite
def denied_spellings(draw: st.DrawFn) -> tuple[Denied, str]:
    denied = draw(st.sampled_from(DENIED_FLAGS))
    spelling = draw(st.sampled_from(TABLE.by_string[denied.name].strings))
    cut = draw(st.integers(min_value=3, max_value=len(spelling)))
    body = "".join(draw(st.sampled_from("-_")) if ch == "-" else ch for ch in spelling[2:cut])
    suffix = draw(st.sampled_from(["", "=1", "=", "=/etc/passwd", ".x=1"]))
    return denied, "--" + body + suffix


def _reads_as_denied(token: str, denied: Denied) -> bool:
    option = resolve_token(token).option
    if option is None or TABLE.by_string[option].dest != TABLE.by_string[denied.name].dest:
        return False
    return option == denied.name or not option.startswith(("--no-", "--disable-"))


@SETTINGS
@given(denied_spellings(), st.integers(min_value=0, max_value=2))
def test_denied_flags_are_found_in_every_spelling_and_allowed_by_name(
    case: tuple[Denied, str], position: int
) -> None:
    denied, token = case
    args = ["--enforce-eager"] * position + [token]
    found = find_policy_violations(_spec(args), PolicyConfig(), IMAGE)
    fields = [v.field for v in found]
    if _reads_as_denied(token, denied):
        assert fields == [f"spec.engine.extraArgs[{position}]"]
        assert f"vLLM's {denied.name}, which the operator's policy denies" in found[0].message
        allowing = PolicyConfig(allowed_flags=[denied.name])
        assert find_policy_violations(_spec(args), allowing, IMAGE) == []
    else:
        assert all(denied.name not in v.message for v in found)


@SETTINGS
@given(denied_spellings())
def test_the_admission_regex_matches_exactly_what_the_operator_denies(
    case: tuple[Denied, str],
) -> None:
    denied, token = case
    # CEL's matches() is RE2 partial matching; the patterns are anchored ^...$, and `$` is
    # the end of text in RE2 (\Z in Python)
    admission = re.search(denied_flag_pattern(denied).removesuffix("$") + r"\Z", token)
    assert (admission is not None) == _reads_as_denied(token, denied)


def test_every_admission_regex_has_no_backslash_or_quote() -> None:
    # it lands in a single-quoted CEL string inside a double-quoted YAML string as is
    for denied in DENIED_FLAGS:
        assert not set("\\'\"") & set(denied_flag_pattern(denied)), denied.name


NAME_CHARS = st.sampled_from("abcdefghijklmnopqrstuvwxyz-_=.0123456789")


@SETTINGS
@given(st.lists(NAME_CHARS, min_size=1, max_size=24).map(lambda cs: "--" + "".join(cs)))
def test_the_renderer_passes_no_element_vllm_would_exit_on(token: str) -> None:
    resolution = resolve_token(token)
    try:
        args = build_args(_spec([token]))
    except RenderError as exc:
        assert str(exc).startswith(f'spec.engine.extraArgs[0]: "{token}"')
        return
    assert args[-1] == token
    assert not resolution.unknown and not resolution.ambiguous


ENV_NAMES = st.one_of(
    st.sampled_from([d.name for d in DENIED_ENV]),
    st.from_regex(r"[A-Z_][A-Z0-9_]{0,12}", fullmatch=True),
)


@SETTINGS
@given(st.lists(ENV_NAMES, min_size=1, max_size=5), st.data())
def test_denied_env_is_refused_by_name_unless_allowed(
    names: list[str], data: st.DataObject
) -> None:
    denied = {d.name for d in DENIED_ENV}
    allowed = data.draw(st.lists(st.sampled_from(sorted(denied)), max_size=3, unique=True))
    env = [EnvVar(name=n, value="x") for n in names]
    found = find_policy_violations(_spec([], env), PolicyConfig(allowed_env=allowed), IMAGE)
    refused = denied - set(allowed)
    expected = [f"spec.engine.env[{i}].name" for i, n in enumerate(names) if n in refused]
    assert [v.field for v in found] == expected
