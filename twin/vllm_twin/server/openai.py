"""OpenAI-protocol bodies for the twin: parse requests into engine work, build answers.

Prompt-length convention (docs/twin.md): a text prompt costs one token per whitespace-separated
word; a prompt given as a list of token ids costs one token per id. Chat messages cost the words
of their text content (no chat-template overhead). Generated text is one word (`" tok"`) per
output token, so a client can count tokens the same way.

Error bodies follow vLLM's `{"error": {"message", "type", "param", "code"}}` shape; the 503
admission body is byte-for-byte vLLM 0.33's (docs/vllm-0.33.md §2.2).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vllm_operator.sim.engine import MAX_N_SEQUENCES

OUTPUT_WORD = " tok"
DEFAULT_COMPLETION_MAX_TOKENS = 16  # the OpenAI completions default, which vLLM keeps


class RequestError(Exception):
    """A request vLLM would refuse with a 4xx; `body()` is the JSON answer."""

    def __init__(self, message: str, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param

    @property
    def type(self) -> str:
        return {400: "BadRequestError", 404: "NotFoundError"}.get(self.status, "BadRequestError")

    def body(self) -> bytes:
        return error_body(self.message, self.type, self.status, self.param)

    @classmethod
    def from_engine(cls, exc: ValueError) -> RequestError:
        """The engine's InvalidRequestError (prompt longer than the context, ...) as a 400."""
        return cls(str(exc))


def error_body(message: str, type_: str, code: int, param: str | None = None) -> bytes:
    payload = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    # vLLM serialises compactly; the 503 body must match it byte for byte
    return json.dumps(payload, separators=(",", ":")).encode()


def overload_body(message: str) -> bytes:
    return error_body(message, "Service Unavailable", 503)


@dataclass(frozen=True)
class WorkRequest:
    """What one completion or chat request asks of the engine."""

    prompt_tokens: int
    max_tokens: int  # after vLLM's clamp to max_model_len - prompt
    n: int
    priority: int
    stream: bool
    include_usage: bool
    model: str | None


def _int_field(body: Mapping[str, Any], name: str, default: int | None) -> int | None:
    value = body.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{name} must be an integer, got {value!r}", param=name)
    return value


def count_prompt_tokens(prompt: Any) -> int:
    if isinstance(prompt, str):
        return len(prompt.split())
    if isinstance(prompt, list) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in prompt
    ):
        return len(prompt)
    if isinstance(prompt, list):
        raise RequestError("the twin serves one prompt per request (a string or token ids)")
    raise RequestError("prompt must be a string or a list of token ids", param="prompt")


def _message_text(content: Any, where: str) -> str:
    """A message's text; its content as vLLM's request model accepts it: none, a string, or a
    list of parts (objects), whose `text`, where there is one, is a string."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise RequestError(f"{where} must be a string or a list of parts", param=where)
    texts = []
    for k, part in enumerate(content):
        if not isinstance(part, dict):
            raise RequestError(f"{where}[{k}] must be an object", param=f"{where}.{k}")
        text = part.get("text", "")
        if not isinstance(text, str):
            raise RequestError(f"{where}[{k}].text must be a string", param=f"{where}.{k}.text")
        texts.append(text)
    return " ".join(texts)


def count_chat_tokens(messages: Any) -> int:
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list", param="messages")
    words = 0
    for k, message in enumerate(messages):
        # vLLM's message model requires a role (any string: custom roles pass) and validates
        # the content; a message of another shape is a 400, not a message of no words
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RequestError(
                f"messages[{k}] must be an object with a string role", param=f"messages.{k}"
            )
        words += len(_message_text(message.get("content"), f"messages.{k}.content").split())
    return max(1, words)  # a chat template always renders some tokens


# pydantic's lax booleans, which vLLM's request models (pydantic) accept for a bool field
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


def _bool_field(body: Mapping[str, Any], name: str, where: str | None = None) -> bool:
    value = body.get(name)
    name = where or name
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise RequestError(f"{name} must be a boolean, got {value!r}", param=name)


def parse_work(body: Mapping[str, Any], *, chat: bool, max_model_len: int) -> WorkRequest:
    """Validate a request body the way vLLM's serving layer does, for the fields the twin uses."""
    if chat:
        prompt = count_chat_tokens(body.get("messages"))
        requested = _int_field(body, "max_completion_tokens", None)
        if requested is None:
            requested = _int_field(body, "max_tokens", None)
    else:
        if "prompt" not in body:
            raise RequestError("prompt is required", param="prompt")
        prompt = count_prompt_tokens(body["prompt"])
        requested = _int_field(body, "max_tokens", DEFAULT_COMPLETION_MAX_TOKENS)
    if prompt == 0:
        raise RequestError("The decoder prompt cannot be empty", param="prompt")
    if requested is not None and requested < 1:
        raise RequestError(f"max_tokens must be at least 1, got {requested}.", param="max_tokens")
    # vLLM clamps max_tokens to the room left in the context, and an unset one means "all of
    # it". A prompt that leaves no room is refused by the engine after admission, as in vLLM.
    room = max_model_len - prompt
    if room >= 1:
        max_tokens = room if requested is None else min(requested, room)
    else:
        max_tokens = requested or 1
    n = _int_field(body, "n", 1)
    n = 1 if n is None else n
    if n < 1:
        raise RequestError(f"n must be at least 1, got {n}.", param="n")
    if n > MAX_N_SEQUENCES:
        raise RequestError(f"n must be at most {MAX_N_SEQUENCES}, got {n}.", param="n")
    priority = _int_field(body, "priority", 0)
    stream = _bool_field(body, "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise RequestError("stream_options must be an object", param="stream_options")
    if options and not stream:
        # vLLM's validate_stream_options (an empty object passes, as there)
        raise RequestError(
            "Stream options can only be defined when `stream=True`.", param="stream_options"
        )
    include_usage = _bool_field(options or {}, "include_usage", "stream_options.include_usage")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError(f"model must be a string, got {model!r}", param="model")
    return WorkRequest(
        prompt_tokens=prompt,
        max_tokens=max_tokens,
        n=n,
        priority=priority or 0,
        stream=stream,
        include_usage=include_usage,
        model=model,
    )


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
    }


def choice(chat: bool, index: int, tokens: int, finish_reason: str | None) -> dict[str, Any]:
    """A full (non-streamed) choice with `tokens` generated words."""
    text = OUTPUT_WORD * tokens
    if chat:
        return {
            "index": index,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": None,
        }
    return {
        "index": index,
        "text": text,
        "logprobs": None,
        "finish_reason": finish_reason,
        "stop_reason": None,
    }


def chunk_choice(
    chat: bool, index: int, tokens: int, finish_reason: str | None, first: bool = False
) -> dict[str, Any]:
    """A streamed choice delta carrying `tokens` new words."""
    text = OUTPUT_WORD * tokens
    if chat:
        delta: dict[str, Any] = (
            {"role": "assistant", "content": text} if first else {"content": text}
        )
        return {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    return {
        "index": index,
        "text": text,
        "logprobs": None,
        "finish_reason": finish_reason,
        "stop_reason": None,
    }


def envelope(chat: bool, stream: bool, request_id: str, created: int, model: str) -> dict[str, Any]:
    obj = "text_completion"
    if chat:
        obj = "chat.completion.chunk" if stream else "chat.completion"
    return {"id": request_id, "object": obj, "created": created, "model": model}


def sse(payload: Mapping[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()
