"""Every field of vLLM 0.33.0's request models, with values of every JSON kind, against the twin.

test_vllm_requests.py checks the fields the twin serves value by value. This tier covers what it
does not: the field list comes from vLLM's own `CompletionRequest` / `ChatCompletionRequest`
(tests/parity/vllm_probe.py --request-fields), so a field vLLM adds is sent too, and each field
gets a value of each JSON kind (KINDS) alone; then a seeded random corpus sets two to four fields
at once, from KINDS and from test_vllm_requests' values. Both go to vLLM's request model, its
renderer, its SamplingParams and its input processor (vllm_probe.py --requests) and to the
twin's `parse_work` / `engine_prompts`, and must agree: the same bodies refused at the request
model, and the same message and param after it. Where one of vLLM's validators assumes a type
and raises (its server's 500), the twin must refuse the body (400).

Structural tags are left out: vLLM checks their grammar with xgrammar, which the twin does not
reproduce (request_unserved.py).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.parity.gen_options import ReferenceError, run_probe
from tests.parity.test_vllm_requests import CHAT, COMPLETION, MAX_MODEL_LEN, VALUES, _prompt_lens
from vllm_twin.server.openai import RequestError, engine_prompts, parse_work
from vllm_twin.server.request_model import ChatBody, CompletionBody

pytestmark = pytest.mark.timeout(1800)

# One value of each JSON kind, and the shapes vLLM's nested fields take (a response format, a
# tool and a named tool choice, structured outputs, base64 embeddings), and lengths around the
# context (MAX_MODEL_LEN) and the completion batch limit (1,024 prompts).
KINDS: list[Any] = [
    "x", "", "left", "auto", "none", "required", "YQ==", 5, 0, -5, -1, 2, 100, 4096, 4097,
    10**30, 1.5, True, False, None, [], {}, [1], ["a"], ["YQ=="], {"a": 1},
    {"type": "json_schema"}, {"type": "text"},
    {"type": "json_schema", "json_schema": {"name": "n"}},
    {"json": "x"}, {"json": "x", "regex": "y"}, {"regex": "a+"}, {"json_object": True},
    {"max_pattern_size": 2, "min_count": 1}, [{"function": {"name": "f"}}],
    [{"type": "function", "function": {"name": "f", "parameters": {}}}],
    {"type": "function", "function": {"name": "f"}}, {"function": {"name": "g"}},
    [{"title": "t", "text": "x"}], {"k": [1, "a"]}, [1] * 5000, ["a"] * 1025,
]  # fmt: skip
RANDOM_BODIES = 1500  # per kind of request; about 10 s of vLLM on 2 cores for all of them
SEED = 20261207


@pytest.fixture(scope="module")
def fields(vllm_python: str) -> dict[str, list[str]]:
    try:
        answer = run_probe(vllm_python, ["--request-fields"])
    except ReferenceError as exc:
        pytest.fail(str(exc), pytrace=False)
    assert answer["vllm"] == "0.33.0"
    return {"chat": answer["chat"], "completion": answer["completion"]}


def _one_field_bodies(fields: dict[str, list[str]]) -> list[tuple[bool, dict[str, Any]]]:
    bodies = []
    for chat in (False, True):
        base = CHAT if chat else COMPLETION
        for name in fields["chat" if chat else "completion"]:
            for value in KINDS:
                body = {**base, name: value}
                if name == "stream_options":
                    body["stream"] = True  # else refused for that alone
                bodies.append((chat, body))
    return bodies


def _random_bodies(fields: dict[str, list[str]]) -> list[tuple[bool, dict[str, Any]]]:
    rng = random.Random(SEED)
    bodies = []
    for chat in (False, True):
        names = fields["chat" if chat else "completion"]
        for _ in range(RANDOM_BODIES):
            body = dict(CHAT if chat else COMPLETION)
            for _ in range(rng.randint(2, 4)):
                name = rng.choice(names)
                body[name] = rng.choice(KINDS + VALUES.get(name, []))
            bodies.append((chat, body))
    return bodies


def _disagreements(vllm_python: str, bodies: list[tuple[bool, dict[str, Any]]]) -> list[str]:
    payload = [
        {"chat": chat, "body": body, "max_model_len": MAX_MODEL_LEN,
         "prompt_lens": _prompt_lens(chat, body)}
        for chat, body in bodies
    ]  # fmt: skip
    try:
        answer = run_probe(vllm_python, ["--requests"], payload)
    except ReferenceError as exc:
        pytest.fail(str(exc), pytrace=False)
    assert len(answer["results"]) == len(bodies)
    found = []
    for (chat, body), theirs in zip(bodies, answer["results"], strict=True):
        problem = _disagreement(chat, body, theirs)
        if problem is not None:
            shown = {k: v if len(repr(v)) < 60 else "<long>" for k, v in body.items()}
            found.append(f"{'chat' if chat else 'completion'} {shown}: {problem}")
    return found


def _disagreement(chat: bool, body: dict[str, Any], theirs: dict[str, Any]) -> str | None:
    """How the twin's answer to `body` differs from vLLM's (`theirs`); None when it does not."""
    try:
        work = parse_work(body, chat=chat)
    except RequestError as exc:
        if theirs["accepted"]:
            return f"the twin refuses ({exc.message}), vLLM's request model accepts"
        return None
    if not theirs["accepted"]:
        kind = "raises (a 500)" if theirs.get("crash") else "refuses"
        return f"the twin accepts, vLLM's request model {kind}: {theirs['error']}"
    try:
        engine_prompts(work, MAX_MODEL_LEN)
        ours = None
    except RequestError as exc:
        ours = {"message": exc.message, "param": exc.param}
    expected = theirs["render"] or theirs["sampling"] or theirs["prompt"]
    return None if ours == expected else f"twin {ours}, vLLM {expected}"


def test_the_twin_types_every_field_of_vllms_request_models(fields: dict[str, list[str]]) -> None:
    ours = {
        "chat": sorted({*ChatBody.model_fields, "messages"}),  # messages: openai.py's
        "completion": sorted(CompletionBody.model_fields),
    }
    assert ours == fields


def test_each_field_alone_with_a_value_of_each_kind(
    vllm_python: str, fields: dict[str, list[str]]
) -> None:
    found = _disagreements(vllm_python, _one_field_bodies(fields))
    assert not found, f"{len(found)} bodies answered differently:\n" + "\n".join(found[:20])


def test_fields_together_in_a_seeded_random_corpus(
    vllm_python: str, fields: dict[str, list[str]]
) -> None:
    found = _disagreements(vllm_python, _random_bodies(fields))
    assert not found, f"{len(found)} bodies answered differently:\n" + "\n".join(found[:20])
