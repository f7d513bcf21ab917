"""The twin's request validation against vLLM 0.33.0's own request models and sampling checks.

Each body below, a completion or a chat request with one field set to a good or a bad value (or
a few fields together, COMBOS), goes to vLLM's `CompletionRequest` / `ChatCompletionRequest`
(tests/parity/vllm_probe.py --requests) and to the twin's `parse_work`: the twin refuses exactly
what vLLM's model refuses, except where it serves less than vLLM (TWIN_LIMITS: a non-empty
message list; docs/twin.md). A body both accept then goes to vLLM's `to_sampling_params`, with
the max_tokens its serving layer computes, and to the twin's `engine_prompts`: the same refusal,
word for word and with the same param, or none. vLLM's own validators that read fields the twin
does not type (tools, response formats, logprob_token_ids, beam search) are not in the corpus.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.parity.gen_options import ReferenceError, run_probe
from vllm_twin.server.openai import RequestError, engine_prompts, parse_work

pytestmark = pytest.mark.timeout(1800)

COMPLETION: dict[str, Any] = {"model": "m", "prompt": "hello world"}
CHAT: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi there"}]}
VALUES: dict[str, list[Any]] = {
    "max_tokens": [5, "5", 5.0, 5.5, -1, 0, None, True, "x", [5], " 7 "],
    "max_completion_tokens": [5, "5", "x", None],
    "n": [2, "2", 2.0, 0, -1, True, None, "x", 2.5, 16385],
    "stream": [True, "true", "yes", 1, 2, "x", None, [], " 1 ", "off"],
    "priority": [1, "1", -5, 1.0, 1.5, None, "x", 2**63],
    "temperature": [0.5, "0.5", "hot", -1, 3, None, [1], 0.001, float("inf"), 2.0],
    "top_p": [0.5, 1.5, 0, "x", None, -0.5],
    "top_k": [5, -1, 0, "x", 1.5, -2],
    "min_p": [0.1, "x", 1.5, -0.1],
    "seed": [1, "x", 2**70, -(2**63), None],
    "stop": ["x", ["a", "b"], 5, [1], None, ["x"] * 129, "", ["a", ""]],
    "stop_token_ids": [[1, 2], ["a"], None],
    "logprobs": [True, 5, None, "x"],
    "top_logprobs": [None, 2],
    "ignore_eos": [True, "x", None, "false"],
    "min_tokens": [1, -1, "x", 5000],
    "presence_penalty": [0.5, 3, "x", -2],
    "frequency_penalty": [0.5, "x", -3],
    "repetition_penalty": [1.1, "x", 0, -1, float("inf")],
    "logit_bias": [{"1": 0.5}, {"1": "x"}, "x", {"x": 1}, {" 7": 1, "8.0": 2}],
    "user": ["u", 5, None],
    "echo": [True, "x"],
    "suffix": ["s", 5],
    "stream_options": [{"include_usage": True}, {}, "x", {"include_usage": "x"}, {"bogus": 1}],
    "model": [None, 5, "m"],
    "prompt": ["", [1, 2], [-1], [[1, 2]], 5, None, ["a", "b"], [True], [], [[]], ["a", ""]],
    "messages": [[], [{"role": "user"}], [{"content": "x"}], "x", [{"role": "user", "content": 5}]],
    "bogus_field": [1],
}
CHAT_ONLY = {"messages", "max_completion_tokens", "top_logprobs"}
COMPLETION_ONLY = {"prompt", "echo", "suffix"}
TWIN_LIMITS: set[tuple[str, str]] = set()  # (field, repr(value)) the twin serves differently
# fields set together: greedy sampling with n > 1, min_tokens past max_tokens, the logprobs a
# completion echoes, a prompt that leaves no room (4,096 ids), a batch of prompts
COMBOS: list[dict[str, Any]] = [
    {"temperature": 0, "n": 2},
    {"temperature": 1e-6, "n": 2},
    {"temperature": 0.001, "n": 2},
    {"temperature": 0, "n": 1},
    {"min_tokens": 20, "max_tokens": 10},
    {"min_tokens": 20, "max_completion_tokens": 10},
    {"echo": True, "logprobs": 2},
    {"echo": True, "max_tokens": 0},
    {"echo": True, "max_tokens": 0, "min_tokens": 2},
    {"prompt": [1] * 4096},
    {"prompt": [1] * 4096, "echo": True, "max_tokens": 0},
    {"prompt": [1] * 4000, "max_tokens": 200, "min_tokens": 100},
    {"prompt": ["a", "b"], "n": 2},
]
MAX_MODEL_LEN = 4096


def _cases() -> list[tuple[str, bool, dict[str, Any], tuple[str, str]]]:
    cases = []
    for chat in (False, True):
        base = CHAT if chat else COMPLETION
        only = COMPLETION_ONLY if chat else CHAT_ONLY
        for field, values in VALUES.items():
            if field in only:
                continue
            for value in values:
                body = {**base, field: value}
                if field == "stream_options" and isinstance(value, dict) and value:
                    body["stream"] = True  # else refused for that alone
                case_id = f"{'chat' if chat else 'completion'}:{field}={value!r}"[:120]
                cases.append((case_id, chat, body, (field, repr(value))))
        for combo in COMBOS:
            if only & combo.keys():
                continue
            case_id = f"{'chat' if chat else 'completion'}:{combo!r}"[:120]
            cases.append((case_id, chat, {**base, **combo}, ("combo", repr(combo))))
    return cases


def _prompt_lens(chat: bool, body: dict[str, Any]) -> list[int]:
    """What the twin counts for the body's prompts; the probe takes them as their lengths."""
    try:
        return list(parse_work(body, chat=chat).prompts)
    except RequestError:
        return [1]


CASES = _cases()


@pytest.fixture(scope="module")
def verdicts(vllm_python: str) -> list[dict[str, Any]]:
    payload = [
        {
            "chat": chat,
            "body": body,
            "max_model_len": MAX_MODEL_LEN,
            "prompt_lens": _prompt_lens(chat, body),
        }
        for _, chat, body, _ in CASES
    ]
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
        parse_work(body, chat=chat)
        ours = None
    except RequestError as exc:
        ours = exc.message
    if (field, value) in TWIN_LIMITS:
        assert theirs["accepted"] and ours is not None, (ours, theirs)
        return
    assert (ours is not None) == (not theirs["accepted"]), (ours, theirs["error"])


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c[0] for c in CASES])
def test_the_twin_refuses_what_vllms_sampling_params_refuse_in_its_words(
    index: int, verdicts: list[dict[str, Any]]
) -> None:
    _, chat, body, _ = CASES[index]
    theirs = verdicts[index]
    try:
        work = parse_work(body, chat=chat)
    except RequestError:
        return  # the request model's verdict, above
    if not theirs["accepted"]:
        return
    try:
        engine_prompts(work, MAX_MODEL_LEN)
        ours = None
    except RequestError as exc:
        ours = {"message": exc.message, "param": exc.param}
    # the renderer's verdict, else the sampling checks', else the input processor's
    assert ours == (theirs["render"] or theirs["sampling"] or theirs["prompt"])
