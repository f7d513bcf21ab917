"""vLLM's argv rewrite before argparse (vllm_operator.vllm.rewrite); the parity tier's argv fuzz
compares its effect with vLLM's own parser."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vllm_operator.vllm.rewrite import DottedArgError, is_dotted, rewrite_argv


def _rewritten(*argv: str) -> list[str]:
    return list(rewrite_argv(argv).tokens)


def test_dotted_options_become_one_json_value_each_after_the_rest() -> None:
    argv = ["--compilation-config.mode", "3", "--port", "1", "--compilation-config.cache_dir=x"]
    assert _rewritten(*argv) == [
        "--port",
        "1",
        "--compilation-config",
        json.dumps({"mode": 3, "cache_dir": "x"}),
    ]


def test_values_read_as_json_then_human_readable_int_then_text() -> None:
    tokens = _rewritten("--a.b=1k", "--a.c=[1]", "--a.d=abc", "--a.e.f=true")
    assert json.loads(tokens[1]) == {"b": 1000, "c": [1], "d": "abc", "e": {"f": True}}


def test_a_plus_key_is_a_list_and_lists_concatenate() -> None:
    assert json.loads(_rewritten("--a.b+", "x,y", "--a.b+=z")[1]) == {"b": ["x", "y", "z"]}


def test_each_token_keeps_the_index_it_came_from() -> None:
    got = rewrite_argv(["--x", "--a.b", "1", "-O3", "--a.c=2"])
    assert list(zip(got.tokens, got.origins, strict=True)) == [
        ("--x", 0),
        ("--optimization-level", 3),
        ("3", 3),
        ("--a", 1),
        ('{"b": 1, "c": 2}', 1),
    ]


def test_a_bare_negative_decimal_is_a_dotted_option_that_takes_the_next_token() -> None:
    assert _rewritten("--x", "-0.5", "--y") == ["--x", "-0", json.dumps({"5": "--y"})]


def test_names_lose_underscores_up_to_the_first_dot_only() -> None:
    assert _rewritten("--max_num_seqs=a_b", "--a_b.c_d=1") == [
        "--max-num-seqs=a_b",
        "--a-b",
        json.dumps({"c_d": 1}),
    ]


def test_the_level_shorthands_are_rewritten_before_dotted_options() -> None:
    assert _rewritten("-O", "2", "-O=-0.5", "x") == [
        "--optimization-level",
        "2",
        "--optimization-level",
        "-0",
        json.dumps({"5": "x"}),
    ]


def test_a_dotted_option_without_its_value_at_the_end_is_refused() -> None:
    with pytest.raises(DottedArgError, match=r"--a\.b") as info:
        rewrite_argv(["--x", "1", "--a.b"])
    assert info.value.index == 2


TOKENS = st.lists(
    st.one_of(
        st.sampled_from(["--a.b", "--a.b+", "-0.5", "-O", "-O3", "3", "x,y", "--c=d.e", "--"]),
        st.text(alphabet="-_.=abc0123", max_size=8),
    ),
    max_size=12,
)


@given(TOKENS)
def test_argparse_sees_no_dotted_option_and_every_origin_is_an_input_token(
    argv: list[str],
) -> None:
    try:
        got = rewrite_argv(argv)
    except DottedArgError as exc:
        assert is_dotted(argv[exc.index]) or argv[exc.index].startswith("-O")
        return
    assert not any(is_dotted(token) for token in got.tokens)
    assert all(0 <= at < len(argv) for at in got.origins)
    assert len(got.origins) == len(got.tokens)
