"""Request bodies → engine work, with vLLM's defaults, clamps and error shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_twin.server.openai import (
    RequestError,
    WorkRequest,
    count_chat_tokens,
    count_prompts,
    engine_prompts,
    one_line,
    parse_work,
)


def work(body: dict[str, Any], chat: bool = False) -> WorkRequest:
    return parse_work(body, chat=chat)


def prompts(body: dict[str, Any], chat: bool = False, max_model_len: int = 100) -> list[Any]:
    """(prompt tokens, max tokens) of each prompt the engine gets."""
    got = engine_prompts(work(body, chat), max_model_len)
    return [(p.prompt_tokens, p.max_tokens) for p in got]


def test_completion_defaults() -> None:
    assert work({"prompt": "a b  c\nd"}) == WorkRequest(
        prompts=(4,),
        requested=16,
        priority=0,
        stream=False,
        include_usage=False,
        model=None,
    )


def test_fields_are_passed_through() -> None:
    w = work(
        {
            "prompt": [5, 6, 7],
            "max_tokens": 9,
            "n": 3,
            "priority": -2,
            "stream": True,
            "stream_options": {"include_usage": True},
            "model": "chat",
        }
    )
    assert (w.prompts, w.requested, w.n, w.priority, w.stream, w.include_usage, w.model) == (
        (3,),
        9,
        3,
        -2,
        True,
        True,
        "chat",
    )
    assert not w.tokenized


def test_max_tokens_is_clamped_to_the_room_left_and_chat_defaults_to_all_of_it() -> None:
    assert prompts({"prompt": "w " * 90, "max_tokens": 50}) == [(90, 10)]
    chat = {"messages": [{"role": "user", "content": "w " * 30}]}
    assert prompts(chat, chat=True) == [(30, 70)]
    assert prompts({**chat, "max_completion_tokens": 5, "max_tokens": 9}, chat=True) == [(30, 5)]
    # echo with max_tokens 0 is vLLM's "echo without generation": one token is generated
    assert prompts({"prompt": "a b", "echo": True, "max_tokens": 0}) == [(2, 1)]
    # the prompts of a batch are clamped each
    assert prompts({"prompt": ["w " * 95, "w"], "max_tokens": 50}) == [(95, 5), (1, 50)]


@pytest.mark.parametrize(
    ("body", "chat", "param", "message"),
    [
        # vLLM's renderer: max_tokens above the context, a prompt longer than it (a text prompt
        # is tokenised to one token past it: "at least"); its input processor: one that fills it
        (
            {"prompt": "w", "max_tokens": 101},
            False,
            "max_tokens",
            "max_tokens=101 cannot be greater than max_model_len=100. Please request fewer "
            "output tokens.",
        ),
        (
            {"messages": [{"role": "user", "content": "w"}], "max_completion_tokens": 200},
            True,
            "max_completion_tokens",
            "max_completion_tokens=200 cannot be greater than max_model_len=100.",
        ),
        (
            {"prompt": "w " * 300},
            False,
            "input_tokens",
            "This model's maximum context length is 100 tokens. However, your prompt contains "
            "at least 101 input tokens, which exceeds this limit even without any output tokens."
            " Please reduce the length of the input prompt.",
        ),
        (
            {"prompt": [1] * 300},
            False,
            "input_tokens",
            "However, your prompt contains 300 input tokens",
        ),
        (
            {"prompt": ["w", "w " * 101]},
            False,
            "input_tokens",
            "contains at least 101 input tokens",
        ),
        # a prompt that fills the context leaves max_tokens 0, which SamplingParams refuses
        (
            {"prompt": [1] * 100, "max_tokens": 3},
            False,
            "max_tokens",
            "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)",
        ),
        # what SamplingParams refuses, in its order, with the engine's max_tokens
        (
            {"prompt": "a", "max_tokens": 0},
            False,
            "max_tokens",
            "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)",
        ),
        ({"prompt": "a", "n": 0}, False, None, "n must be at least 1, got 0."),
        (
            {"prompt": "a", "n": 10**30},
            False,
            None,
            f"n must be at most 16384, got {10**30}. To increase this limit, set the "
            "VLLM_MAX_N_SEQUENCES environment variable.",
        ),
        ({"prompt": "a", "presence_penalty": 3}, False, None, "in [-2, 2], got 3.0."),
        ({"prompt": "a", "frequency_penalty": -9}, False, None, "in [-2, 2], got -9.0."),
        ({"prompt": "a", "repetition_penalty": 0}, False, None, "greater than zero, got 0.0."),
        (
            {"prompt": "a", "temperature": 2.5},
            False,
            "temperature",
            "temperature must be in [0, 2], got 2.5. (parameter=temperature, value=2.5)",
        ),
        ({"prompt": "a", "temperature": -1}, False, "temperature", "non-negative, got -1.0."),
        ({"prompt": "a", "top_p": 0}, False, "top_p", "top_p must be in (0, 1], got 0.0."),
        ({"prompt": "a", "top_k": -2}, False, None, "or at least 1, got -2."),
        ({"prompt": "a", "min_p": 1.5}, False, None, "min_p must be in [0, 1], got 1.5."),
        ({"prompt": "a", "min_tokens": -1}, False, None, "greater than or equal to 0, got -1."),
        # min_tokens against the clamped max_tokens: 10 tokens of room left
        (
            {"prompt": "w " * 90, "max_tokens": 50, "min_tokens": 20},
            False,
            None,
            "min_tokens must be less than or equal to max_tokens=10, got 20.",
        ),
        ({"prompt": "a", "stop": ""}, False, None, "stop cannot contain an empty string."),
        ({"prompt": ["a", ""]}, False, None, "The decoder prompt cannot be empty"),
        ({"prompt": [[]]}, False, None, "The decoder prompt cannot be empty"),
        ({"prompt": "a", "stop": ["x", ""]}, False, None, "stop cannot contain an empty"),
        (
            {"prompt": "a", "logit_bias": {"5": 1, "x": 2}},
            False,
            "logit_bias",
            "logit_bias contains key(s) that cannot be converted to integer token IDs: ['x'] "
            "(parameter=logit_bias, value=['x'])",
        ),
        (
            {"prompt": "a", "temperature": 0, "n": 2},
            False,
            None,
            "n must be 1 when using greedy sampling, got 2.",
        ),
        (
            {"messages": [{"role": "u", "content": "a"}], "temperature": 0.0, "n": 3},
            True,
            None,
            "n must be 1 when using greedy sampling, got 3.",
        ),
    ],
)
def test_refusals_after_admission_are_vllms(
    body: dict[str, Any], chat: bool, param: str | None, message: str
) -> None:
    with pytest.raises(RequestError) as info:
        prompts(body, chat)
    assert message in info.value.message
    assert (info.value.param, info.value.status) == (param, 400)


def test_chat_tokens_count_text_parts() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "one two"}, {"type": "image"}]},
    ]
    assert count_chat_tokens(messages) == 4
    assert count_chat_tokens([{"role": "user", "content": ""}]) == 1
    assert count_chat_tokens([]) == 1  # vLLM takes no messages: the template renders some


@pytest.mark.parametrize(
    ("body", "chat", "message"),
    [
        ({}, False, "Either prompt or prompt_embeds must be provided and non-empty."),
        ({"prompt": ""}, False, "Either prompt or prompt_embeds must be provided"),
        ({"messages": [{"role": "u", "content": "a"}], "top_logprobs": 2}, True, "`logprobs` must"),
        ({"prompt": "a", "logprobs": "x"}, False, "`logprobs` must be an integer."),
        ({"prompt": 5}, False, r"prompt\.list\[.*Input should be a valid list \(and 3 more\)"),
        ({"prompt": [1, -1]}, False, "greater than or equal to 0"),
        (
            {"prompt": "a", "max_tokens": "nine"},
            False,
            "max_tokens: Input should be a valid integer",
        ),
        ({"prompt": "a", "n": None}, False, "n: Input should be a valid integer"),
        (
            {"prompt": "a", "temperature": "hot"},
            False,
            "temperature: Input should be a valid number",
        ),
        ({"prompt": "a", "seed": 2**64}, False, "seed: Input should be less than or equal to"),
        ({"prompt": "a", "stop": [1]}, False, "stop"),
        ({"messages": "x"}, True, "messages must be a list"),
        ({"prompt": "a", "stream": 2}, False, "stream: Input should be a valid boolean"),
        ({"prompt": "a", "stream": [1]}, False, "stream: Input should be a valid boolean"),
        ({"prompt": "a", "stream": "maybe"}, False, "stream: Input should be a valid boolean"),
        ({"prompt": "a", "stream_options": {"include_usage": True}}, False, "`stream=True`"),
        (
            {"prompt": "a", "stream": True, "stream_options": "x"},
            False,
            "instance of StreamOptions",
        ),
        (
            {"prompt": "a", "stream": True, "stream_options": {"include_usage": 3}},
            False,
            "stream_options.include_usage: Input should be a valid boolean",
        ),
        ({"prompt": "a", "model": 5}, False, "model: Input should be a valid string"),
        ({"messages": [{"role": "user", "content": "a"}], "logprobs": 5}, True, "logprobs"),
        ({"messages": [1, 2]}, True, r"messages\[0\] must be an object with a string role"),
        ({"messages": [{"content": "hi"}]}, True, "with a string role"),
        ({"messages": [{"role": "user", "content": 5}]}, True, "string or a list of parts"),
        ({"messages": [{"role": "user", "content": [7]}]}, True, r"content\[0\] must be an"),
        (
            {"messages": [{"role": "user", "content": [{"text": 5}]}]},
            True,
            r"content\[0\].text must be a string",
        ),
    ],
)
def test_refusals(body: dict[str, Any], chat: bool, message: str) -> None:
    with pytest.raises(RequestError, match=message) as info:
        work(body, chat=chat)
    payload = json.loads(info.value.body())
    assert payload["error"]["code"] == 400
    assert payload["error"]["type"] == "BadRequestError"


def test_token_id_prompts_count_ids_and_a_batch_counts_each() -> None:
    assert count_prompts(list(range(17))) == (17,)
    assert count_prompts([[1, 2, 3]]) == (3,) and count_prompts(["a b"]) == (2,)
    assert count_prompts([[1], [2, 3]]) == (1, 2) and count_prompts(["a", "b c"]) == (1, 2)
    # vLLM's model reads true as the token id 1 (pydantic's lax ints), and so does the twin
    assert work({"prompt": [1, True]}).prompt_tokens == 2
    assert work({"prompt": ["a b", "c"]}).prompt_tokens == 3  # usage sums the batch


def test_overload_body_is_vllms_exact_bytes() -> None:
    assert RequestError("busy.", status=503).body() == (
        b'{"error":{"message":"busy.","type":"Service Unavailable","param":null,"code":503}}'
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), (None, False), (1, True), (0, False), ("true", True),
     ("False", False), ("yes", True), ("off", False), ("1", True), ("5", None), (" 1 ", None)],
)  # fmt: skip
def test_stream_reads_booleans_as_vllms_pydantic_model_does(
    value: Any, expected: bool | None
) -> None:
    if expected is None:  # pydantic refuses it, as in vLLM's model
        with pytest.raises(RequestError, match="stream: Input should be a valid boolean"):
            work({"prompt": "a", "stream": value})
        return
    assert work({"prompt": "a", "stream": value}).stream is expected


def test_stream_options_may_be_empty_or_null_without_stream() -> None:
    assert not work({"prompt": "a", "stream_options": {}}).include_usage
    assert not work({"prompt": "a", "stream_options": None}).include_usage


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = ("prompt", "messages", "max_tokens", "max_completion_tokens", "n", "priority", "stream",
          "stream_options", "model", "temperature", "top_p", "top_k", "min_p", "min_tokens",
          "presence_penalty", "frequency_penalty", "repetition_penalty", "stop", "logit_bias",
          "logprobs", "top_logprobs", "echo",
          # typed, not served (request_unserved.py), and read by vLLM's validators
          "tools", "tool_choice", "response_format", "structured_outputs", "cache_salt",
          "truncate_prompt_tokens", "truncation_side", "logprob_token_ids", "use_beam_search",
          "prompt_embeds", "repetition_detection", "vllm_xargs", "thinking_token_budget",
          "continue_final_message", "add_generation_prompt", "request_id")  # fmt: skip


@settings(max_examples=800, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=6), st.booleans())
def test_any_body_is_work_or_a_one_line_400(body: dict[str, Any], chat: bool) -> None:
    """Whatever a client sends: sane work for the engine, or a RequestError whose JSON body is
    vLLM's error shape on one line, never another exception (a 500 in the server). A valid
    prompt is there unless the fuzz replaces it, so most bodies reach the later checks."""
    base = {"messages": [{"role": "user", "content": "a b"}]} if chat else {"prompt": "a b"}
    try:
        w = work({**base, **body}, chat=chat)
        engine = engine_prompts(w, 100)
    except RequestError as exc:
        payload = json.loads(exc.body())
        assert set(payload["error"]) == {"message", "type", "param", "code"}
        assert len(exc.message.splitlines()) == 1 and payload["error"]["code"] == 400
        return
    assert 1 <= w.n <= 16384 and len(engine) == len(w.prompts) >= 1
    assert all(p.prompt_tokens >= 1 for p in engine)
    assert all(1 <= p.max_tokens <= 100 - p.prompt_tokens or w.echo_only for p in engine)
    assert isinstance(w.stream, bool) and isinstance(w.include_usage, bool)
    assert w.model is None or isinstance(w.model, str)


@pytest.mark.parametrize("key", ["\n", "a\r\nb", "\u2028", "x\x1c"])
def test_a_field_path_that_quotes_a_line_break_stays_one_line(key: str) -> None:
    """A `logit_bias` key is part of the field path pydantic names; the message escapes it."""
    with pytest.raises(RequestError) as caught:
        work({"prompt": "a b", "logit_bias": {key: None}}, chat=False)
    message = caught.value.message
    assert len(message.splitlines()) == 1 and message.startswith("logit_bias.")
    assert json.loads(caught.value.body())["error"]["message"] == message


@given(st.text())
def test_one_line_escapes_every_line_break_and_nothing_else(text: str) -> None:
    out = one_line(text)
    assert len(out.splitlines()) <= 1
    if len(text.splitlines()) <= 1 and not any(ch.splitlines() != [ch] for ch in text):
        assert out == text


@pytest.mark.parametrize(
    ("truncate", "max_tokens", "engine"),
    [
        (10, 1, [(10, 1)]),  # cut to 10
        (-1, 1, [(99, 1)]),  # the context less one token for output
        (200, 1, None),  # above the context: the renderer refuses it
        (None, 1, None),  # no truncation: 150 words do not fit
    ],
)
def test_truncate_prompt_tokens_cuts_the_prompt_before_the_length_checks(
    truncate: int | None, max_tokens: int, engine: list[tuple[int, int]] | None
) -> None:
    body = {"prompt": "w " * 150, "max_tokens": max_tokens, "truncate_prompt_tokens": truncate}
    if engine is None:
        with pytest.raises(RequestError):
            prompts(body)
    else:
        assert prompts(body) == engine


def test_a_completion_with_prompt_embeds_is_refused_as_without_enable_prompt_embeds() -> None:
    with pytest.raises(RequestError) as caught:
        prompts({"prompt_embeds": "YQ=="})
    assert caught.value.param == "prompt_embeds"
    assert "--enable-prompt-embeds" in caught.value.message


def test_a_json_schema_format_without_a_schema_leaves_no_constraint() -> None:
    body = {"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"name": "n"}}}
    with pytest.raises(RequestError) as caught:
        prompts(body)
    assert caught.value.message.startswith("You must use one kind of structured outputs")
    schema = {"name": "n", "schema": {"type": "object"}}
    assert prompts(
        {"prompt": "a", "response_format": {"type": "json_schema", "json_schema": schema}}
    )


def test_the_answer_is_named_by_the_header_then_the_body_then_at_random() -> None:
    from vllm_twin.server.generate import answer_id

    assert answer_id(True, "h", "b") == "chatcmpl-h"
    assert answer_id(False, None, "b") == "cmpl-b"
    assert answer_id(False, None, None).startswith("cmpl-")
    assert work({"prompt": "a", "request_id": "r"}).request_id == "r"
    assert work({"prompt": "a"}).request_id is None
