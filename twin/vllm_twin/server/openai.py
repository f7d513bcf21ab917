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

from pydantic import ValidationError

from vllm_operator.sim.engine import MAX_N_SEQUENCES
from vllm_twin.server.request_model import BodyError, ChatBody, first_problem, validate_body

OUTPUT_WORD = " tok"


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


def count_prompt_tokens(prompt: str | list[int] | list[list[int]] | list[str]) -> int:
    """Tokens of a prompt as vLLM's request model types it (request_model.CompletionBody)."""
    if isinstance(prompt, str):
        return len(prompt.split())
    first = prompt[0] if prompt else None
    if isinstance(first, list | str):  # a batch of prompts: lists of ids, or strings
        if len(prompt) != 1:
            raise RequestError(
                "the twin serves one prompt per request (a batch of one, a string or token ids)",
                param="prompt",
            )
        return count_prompt_tokens(first)
    return len(prompt)


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


def parse_work(body: Mapping[str, Any], *, chat: bool, max_model_len: int) -> WorkRequest:
    """Validate a request body the way vLLM's request models and serving layer do, for the
    fields the twin uses or types (request_model.py)."""
    # vLLM's before-validators read the raw body: `"stream": "false"` is truthy there
    if body.get("stream_options") and not body.get("stream"):
        raise RequestError(
            "Stream options can only be defined when `stream=True`.", param="stream_options"
        )
    if not chat and body.get("prompt") in (None, ""):
        raise RequestError(
            "Either prompt or prompt_embeds must be provided and non-empty.", param="prompt"
        )
    try:
        typed = validate_body(body, chat=chat)
    except ValidationError as exc:
        param, message = first_problem(exc)
        raise RequestError(message, param=param) from None
    except BodyError as exc:
        raise RequestError(exc.message, param=exc.param) from None
    if isinstance(typed, ChatBody):
        prompt = count_chat_tokens(body.get("messages"))
        requested = typed.max_completion_tokens
        requested = typed.max_tokens if requested is None else requested
    else:
        prompt = count_prompt_tokens(typed.prompt or "")
        requested = typed.max_tokens
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
    n = 1 if typed.n is None else typed.n
    if n < 1:
        raise RequestError(f"n must be at least 1, got {n}.", param="n")
    if n > MAX_N_SEQUENCES:
        raise RequestError(f"n must be at most {MAX_N_SEQUENCES}, got {n}.", param="n")
    options = typed.stream_options
    return WorkRequest(
        prompt_tokens=prompt,
        max_tokens=max_tokens,
        n=n,
        priority=typed.priority,
        stream=bool(typed.stream),
        include_usage=bool(options is not None and options.include_usage),
        model=typed.model,
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
