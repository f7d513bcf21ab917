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
    count_prompt_tokens,
    overload_body,
    parse_work,
)


def work(body: dict[str, Any], chat: bool = False, max_model_len: int = 100) -> WorkRequest:
    return parse_work(body, chat=chat, max_model_len=max_model_len)


def test_completion_defaults() -> None:
    assert work({"prompt": "a b  c\nd"}) == WorkRequest(
        prompt_tokens=4,
        max_tokens=16,
        n=1,
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
    assert w == WorkRequest(3, 9, 3, -2, True, True, "chat")


def test_max_tokens_is_clamped_to_the_room_left_and_chat_defaults_to_all_of_it() -> None:
    assert work({"prompt": "w " * 90, "max_tokens": 50}).max_tokens == 10
    chat = {"messages": [{"role": "user", "content": "w " * 30}]}
    assert work(chat, chat=True).max_tokens == 70
    assert work({**chat, "max_completion_tokens": 5, "max_tokens": 9}, chat=True).max_tokens == 5
    # no room left: passed on unclamped so that the engine refuses the prompt (after admission)
    assert work({"prompt": "w " * 100, "max_tokens": 3}).max_tokens == 3


def test_chat_tokens_count_text_parts() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "one two"}, {"type": "image"}]},
    ]
    assert count_chat_tokens(messages) == 4
    assert count_chat_tokens([{"role": "user", "content": ""}]) == 1


@pytest.mark.parametrize(
    ("body", "chat", "message"),
    [
        ({}, False, "Either prompt or prompt_embeds must be provided and non-empty."),
        ({"prompt": ""}, False, "Either prompt or prompt_embeds must be provided"),
        ({"prompt": ["a", "b"]}, False, "one prompt per request"),
        ({"messages": [{"role": "u", "content": "a"}], "top_logprobs": 2}, True, "`logprobs` must"),
        ({"prompt": "a", "logprobs": "x"}, False, "`logprobs` must be an integer."),
        ({"prompt": 5}, False, r"prompt\.list\[.*Input should be a valid list \(and 3 more\)"),
        ({"prompt": [1, -1]}, False, "greater than or equal to 0"),
        ({"prompt": "a", "max_tokens": 0}, False, "max_tokens must be at least 1"),
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
        ({"prompt": "a", "n": 0}, False, "n must be at least 1"),
        ({"messages": []}, True, "messages must be a non-empty list"),
        ({"prompt": "a", "n": 16385}, False, "n must be at most 16384"),
        ({"prompt": "a", "n": 10**30}, False, "n must be at most 16384"),
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


def test_token_id_prompts_count_ids() -> None:
    assert count_prompt_tokens(list(range(17))) == 17
    assert count_prompt_tokens([[1, 2, 3]]) == 3 and count_prompt_tokens(["a b"]) == 2
    with pytest.raises(RequestError, match="one prompt per request"):
        count_prompt_tokens([[1], [2]])
    # vLLM's model reads true as the token id 1 (pydantic's lax ints), and so does the twin
    assert work({"prompt": [1, True]}).prompt_tokens == 2


def test_overload_body_is_vllms_exact_bytes() -> None:
    assert overload_body("busy.") == (
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
          "stream_options", "model")  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=6), st.booleans())
def test_any_body_is_work_or_a_one_line_400(body: dict[str, Any], chat: bool) -> None:
    """Whatever a client sends: sane work for the engine, or a RequestError whose JSON body is
    vLLM's error shape on one line, never another exception (a 500 in the server)."""
    try:
        w = work(body, chat=chat)
    except RequestError as exc:
        payload = json.loads(exc.body())
        assert set(payload["error"]) == {"message", "type", "param", "code"}
        assert "\n" not in exc.message and payload["error"]["code"] == 400
        return
    assert 1 <= w.n <= 16384 and w.max_tokens >= 1 and w.prompt_tokens >= 1
    assert isinstance(w.stream, bool) and isinstance(w.include_usage, bool)
    assert w.model is None or isinstance(w.model, str)
