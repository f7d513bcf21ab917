"""The twin's request validation against vLLM 0.33.0's own request models.

Each body below, a completion or a chat request with one field set to a good or a bad value, goes
to vLLM's `CompletionRequest` / `ChatCompletionRequest` (tests/parity/vllm_probe.py --requests)
and to the twin's `parse_work`. The twin refuses exactly what vLLM's model refuses, except where
vLLM refuses later, in its serving layer (SERVING: max_tokens and n below 1, from SamplingParams),
or the twin serves less than vLLM (TWIN_LIMITS: one prompt per request, a non-empty message list;
docs/twin.md). vLLM's own validators that read fields the twin does not type (tools, response
formats, logprob_token_ids, beam search) are not in the corpus.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.parity.gen_options import ReferenceError, run_probe
from vllm_twin.server.openai import RequestError, parse_work

pytestmark = pytest.mark.timeout(1800)

COMPLETION: dict[str, Any] = {"model": "m", "prompt": "hello world"}
CHAT: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi there"}]}
VALUES: dict[str, list[Any]] = {
    "max_tokens": [5, "5", 5.0, 5.5, -1, 0, None, True, "x", [5], " 7 "],
    "max_completion_tokens": [5, "5", "x", None],
    "n": [2, "2", 2.0, 0, -1, True, None, "x", 2.5],
    "stream": [True, "true", "yes", 1, 2, "x", None, [], " 1 ", "off"],
    "priority": [1, "1", -5, 1.0, 1.5, None, "x", 2**63],
    "temperature": [0.5, "0.5", "hot", -1, 3, None, [1]],
    "top_p": [0.5, 1.5, 0, "x", None],
    "top_k": [5, -1, 0, "x", 1.5],
    "min_p": [0.1, "x"],
    "seed": [1, "x", 2**70, -(2**63), None],
    "stop": ["x", ["a", "b"], 5, [1], None, ["x"] * 129],
    "stop_token_ids": [[1, 2], ["a"], None],
    "logprobs": [True, 5, None, "x"],
    "top_logprobs": [None, 2],
    "ignore_eos": [True, "x", None, "false"],
    "min_tokens": [1, -1, "x"],
    "presence_penalty": [0.5, 3, "x"],
    "frequency_penalty": [0.5, "x"],
    "repetition_penalty": [1.1, "x"],
    "logit_bias": [{"1": 0.5}, {"1": "x"}, "x"],
    "user": ["u", 5, None],
    "echo": [True, "x"],
    "suffix": ["s", 5],
    "stream_options": [{"include_usage": True}, {}, "x", {"include_usage": "x"}, {"bogus": 1}],
    "model": [None, 5, "m"],
    "prompt": ["", [1, 2], [-1], [[1, 2]], 5, None, ["a", "b"], [True]],
    "messages": [[], [{"role": "user"}], [{"content": "x"}], "x", [{"role": "user", "content": 5}]],
    "bogus_field": [1],
}
CHAT_ONLY = {"messages", "max_completion_tokens", "top_logprobs"}
COMPLETION_ONLY = {"prompt", "echo", "suffix"}
SERVING = {("max_tokens", "-1"), ("max_tokens", "0"), ("n", "0"), ("n", "-1")}
TWIN_LIMITS = {("prompt", "['a', 'b']"), ("messages", "[]")}


def _cases() -> list[tuple[str, bool, dict[str, Any], tuple[str, str]]]:
    cases = []
    for chat in (False, True):
        base = CHAT if chat else COMPLETION
        for field, values in VALUES.items():
            if field in (COMPLETION_ONLY if chat else CHAT_ONLY):
                continue
            for value in values:
                body = {**base, field: value}
                if field == "stream_options" and isinstance(value, dict) and value:
                    body["stream"] = True  # else refused for that alone
                case_id = f"{'chat' if chat else 'completion'}:{field}={value!r}"[:120]
                cases.append((case_id, chat, body, (field, repr(value))))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def verdicts(vllm_python: str) -> list[dict[str, Any]]:
    payload = [{"chat": chat, "body": body} for _, chat, body, _ in CASES]
    try:
        answer = run_probe(vllm_python, ["--requests"], payload)
    except ReferenceError as exc:
        pytest.fail(str(exc), pytrace=False)
    assert answer["vllm"] == "0.33.0" and len(answer["results"]) == len(CASES)
    return list(answer["results"])


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c[0] for c in CASES])
def test_the_twin_refuses_what_vllms_request_model_refuses(
    index: int, verdicts: list[dict[str, Any]]
) -> None:
    _, chat, body, (field, value) = CASES[index]
    theirs = verdicts[index]
    try:
        parse_work(body, chat=chat, max_model_len=4096)
        ours = None
    except RequestError as exc:
        ours = exc.message
    expected_refusal = not theirs["accepted"]
    if (field, value) in SERVING | TWIN_LIMITS:
        assert theirs["accepted"] and ours is not None, (ours, theirs)
        return
    assert (ours is not None) == expected_refusal, (ours, theirs["error"])
