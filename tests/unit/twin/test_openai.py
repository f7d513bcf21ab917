"""Request bodies → engine work, with vLLM's defaults, clamps and error shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest

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
        ({}, False, "prompt is required"),
        ({"prompt": ""}, False, "cannot be empty"),
        ({"prompt": ["a", "b"]}, False, "one prompt per request"),
        ({"prompt": 5}, False, "string or a list of token ids"),
        ({"prompt": "a", "max_tokens": 0}, False, "max_tokens must be at least 1"),
        ({"prompt": "a", "max_tokens": "9"}, False, "max_tokens must be an integer"),
        ({"prompt": "a", "n": 0}, False, "n must be at least 1"),
        ({"messages": []}, True, "messages must be a non-empty list"),
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
    with pytest.raises(RequestError):
        count_prompt_tokens([1, True])


def test_overload_body_is_vllms_exact_bytes() -> None:
    assert overload_body("busy.") == (
        b'{"error":{"message":"busy.","type":"Service Unavailable","param":null,"code":503}}'
    )
