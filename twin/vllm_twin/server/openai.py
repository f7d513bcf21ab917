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
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from vllm_twin.server.request_model import BodyError, ChatBody, first_problem, validate_body
from vllm_twin.server.sampling import (
    Sampling,
    SamplingError,
    check_sampling,
    sampling_of,
    validation_message,
)

OUTPUT_WORD = " tok"


class RequestError(Exception):
    """A request vLLM would refuse with a 4xx; `body()` is the JSON answer."""

    def __init__(self, message: str, status: int = 400, param: str | None = None) -> None:
        message = one_line(message)
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param

    @property
    def type(self) -> str:
        names = {400: "BadRequestError", 404: "NotFoundError", 503: "Service Unavailable"}
        return names.get(self.status, "BadRequestError")

    def body(self) -> bytes:
        return error_body(self.message, self.type, self.status, self.param)

    @classmethod
    def from_engine(cls, exc: ValueError) -> RequestError:
        """The engine's InvalidRequestError (prompt longer than the context, ...) as a 400."""
        return cls(str(exc))


def one_line(text: str) -> str:
    """`text` with every line break escaped: a message can quote what the client sent (a
    `logit_bias` key of "\\n" is a field path's part), and an error stays one line."""
    return "".join(
        ch.encode("unicode_escape").decode("ascii") if ch.splitlines() != [ch] else ch
        for ch in text
    )


def error_body(message: str, type_: str, code: int, param: str | None = None) -> bytes:
    payload = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    # vLLM serialises compactly; the 503 body must match it byte for byte
    return json.dumps(payload, separators=(",", ":")).encode()


@dataclass(frozen=True)
class WorkRequest:
    """What one completion or chat request asks, as vLLM's request model reads it."""

    prompts: tuple[int, ...]  # each prompt's tokens: a completions batch has several
    requested: int | None  # max_tokens (or chat's max_completion_tokens) as given
    priority: int
    stream: bool
    include_usage: bool
    model: str | None
    tokenized: bool = True  # text (and chat), which vLLM's tokenizer reads; False: token ids
    requested_param: str = "max_tokens"
    sampling: Sampling = field(default_factory=Sampling)
    echo_only: bool = False  # a completion's echo with max_tokens 0: vLLM generates one token
    continuous_usage: bool = False  # stream_options.continuous_usage_stats (with include_usage)
    truncate: int | None = None  # truncate_prompt_tokens: -1 keeps all the context allows
    embeds: bool = False  # a completion gave prompt_embeds, which vLLM serves only when enabled
    request_id: str | None = None  # the body's, which names the answer (`_base_request_id`)

    @property
    def n(self) -> int:
        """Choices per prompt, as sampling reads them (checked after admission)."""
        return self.sampling.n

    @property
    def prompt_tokens(self) -> int:
        """usage.prompt_tokens: the prompts' tokens together, as vLLM sums them."""
        return sum(self.prompts)


@dataclass(frozen=True)
class EnginePrompt:
    """One prompt as the engine gets it: its tokens and the output tokens it may generate."""

    prompt_tokens: int
    max_tokens: int


def count_prompts(prompt: str | list[int] | list[list[int]] | list[str]) -> tuple[int, ...]:
    """Tokens of each prompt, as vLLM's request model types `prompt`: a batch of lists of ids
    or of strings has several, a string or a list of ids is one."""
    if isinstance(prompt, str):
        return (len(prompt.split()),)
    first = prompt[0] if prompt else None
    if isinstance(first, list | str):
        return tuple(count_prompts(p)[0] for p in prompt)  # type: ignore[arg-type]
    return (len(prompt),)


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
    # vLLM's request model takes an empty list (its chat template renders the prompt: for a
    # Llama 3 model the header and the assistant's turn), so the twin serves it too
    if not isinstance(messages, list):
        raise RequestError("messages must be a list", param="messages")
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


def parse_work(body: Mapping[str, Any], *, chat: bool) -> WorkRequest:
    """Validate a request body the way vLLM's request models do, for the fields the twin uses
    or types (request_model.py). What vLLM checks once it has admitted the request (the
    prompts' lengths, max_tokens against the context) is `engine_prompts`'."""
    # vLLM's before-validators read the raw body: `"stream": "false"` is truthy there
    if body.get("stream_options") and not body.get("stream"):
        raise RequestError(
            "Stream options can only be defined when `stream=True`.", param="stream_options"
        )
    embeds = body.get("prompt_embeds")
    if not chat and body.get("prompt") in (None, "") and embeds in (None, []):
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
    param = "max_tokens"
    prompts: tuple[int, ...]
    if isinstance(typed, ChatBody):
        prompts = (count_chat_tokens(body.get("messages")),)
        tokenized = True
        requested = typed.max_completion_tokens
        if requested is None:
            requested = typed.max_tokens
        else:
            param = "max_completion_tokens"
    else:
        prompts = count_prompts(typed.prompt or "")
        tokenized = isinstance(typed.prompt, str) or isinstance((typed.prompt or [0])[0], str)
        requested = typed.max_tokens
    options = typed.stream_options
    # should_include_usage (vllm/entrypoints/serve/utils/api_utils.py)
    include_usage = bool(options is not None and options.include_usage)
    continuous = include_usage and bool(options is not None and options.continuous_usage_stats)
    sampling = sampling_of(typed, chat=chat)
    return WorkRequest(
        prompts=prompts,
        requested=requested,
        priority=typed.priority,
        stream=bool(typed.stream),
        include_usage=include_usage,
        model=typed.model,
        tokenized=tokenized,
        requested_param=param,
        sampling=sampling,
        echo_only=not chat and bool(getattr(typed, "echo", False)) and requested == 0,
        continuous_usage=continuous,
        truncate=typed.truncate_prompt_tokens,
        embeds=getattr(typed, "prompt_embeds", None) not in (None, []),
        request_id=typed.request_id if "request_id" in typed.model_fields_set else None,
    )


def engine_prompts(work: WorkRequest, max_model_len: int) -> tuple[EnginePrompt, ...]:
    """vLLM 0.33's checks between admission and the engine, in its order, and what each prompt
    may generate; RequestError (400) for what they refuse.

    The renderer refuses max_tokens above the context and a prompt longer than it
    (`TokenizeParams`, vllm/renderers/params.py; a text prompt is tokenised up to one token
    past the context, hence "at least"). max_tokens is then clamped to the room each prompt
    leaves, an unset one being all of it (`get_max_tokens`,
    vllm/entrypoints/serve/utils/api_utils.py), and SamplingParams checks the request with it
    (sampling.py): a prompt that fills the context leaves 0, which it refuses. Last, the input
    processor refuses an empty prompt (`[]`, or `""` in a batch: the twin's tokens are words,
    with no special tokens) and one that fills the context (_check_decoder_prompt).
    """
    requested = work.requested
    _check_render(work, max_model_len)
    prompts = _truncated(work, max_model_len)
    for tokens in prompts:
        read = min(tokens, max_model_len + 1) if work.tokenized else tokens
        if read > max_model_len:
            at_least = "at least " if read == max_model_len + 1 else ""
            message = (
                f"This model's maximum context length is {max_model_len} tokens. However, your "
                f"prompt contains {at_least}{read} input tokens, which exceeds this limit even "
                "without any output tokens. Please reduce the length of the input prompt."
            )
            raise RequestError(
                validation_message(message, "input_tokens", read), param="input_tokens"
            )
    out = []
    for tokens in prompts:
        room = max_model_len - tokens
        max_tokens = room if requested is None else min(requested, room)
        if work.echo_only:  # `echo_without_generation` in vLLM's to_sampling_params
            max_tokens = 1
        try:
            check_sampling(work.sampling, max_tokens)
        except SamplingError as exc:
            raise RequestError(exc.message, param=exc.param) from None
        out.append(EnginePrompt(tokens, max_tokens))
    for tokens in prompts:  # vLLM's input processor, as each prompt goes in
        _check_decoder_prompt(tokens, max_model_len)
    return tuple(out)


def _check_render(work: WorkRequest, max_model_len: int) -> None:
    """The renderer's limits (`TokenizeParams.__post_init__`, vllm/renderers/params.py), then
    prompt embeddings, which a server started without `--enable-prompt-embeds` refuses
    (vllm/renderers/embed_utils.py; the twin has no such flag)."""
    requested, param = work.requested, work.requested_param
    if requested is not None and requested > max_model_len:
        message = (
            f"{param}={requested} cannot be greater than max_model_len={max_model_len}. "
            "Please request fewer output tokens."
        )
        raise RequestError(validation_message(message, param, requested), param=param)
    truncate = work.truncate
    if truncate is not None and truncate > max_model_len:
        param = "truncate_prompt_tokens"
        message = (
            f"{param}={truncate} cannot be greater than max_model_len = {max_model_len}. "
            "Please request a smaller truncation size."
        )
        raise RequestError(validation_message(message, param, truncate), param=param)
    if work.embeds:
        message = "You must set `--enable-prompt-embeds` to input `prompt_embeds`."
        param = "prompt_embeds"
        raise RequestError(validation_message(message, param), param=param)


def _truncated(work: WorkRequest, max_model_len: int) -> tuple[int, ...]:
    """Each prompt's tokens after `truncate_prompt_tokens` (`_truncation_slice`): -1 keeps
    what leaves one token of the context for output, all of it when no output is asked."""
    limit = work.truncate
    if limit is None:
        return work.prompts
    if limit < 0:
        # the renderer's max_output_tokens is 0 only where max_tokens (or chat's
        # max_completion_tokens) is
        limit = max_model_len if work.requested == 0 else max_model_len - 1
    return tuple(min(tokens, limit) for tokens in work.prompts)


def _check_decoder_prompt(tokens: int, max_model_len: int) -> None:
    """The input processor's length checks (`_validate_prompt_len`,
    vllm/v1/engine/input_processor.py) that the renderer's leave to it: an empty prompt, and
    one that fills the context (reached only by an echo without generation, which asks for one
    token where a clamped max_tokens of 0 is refused before)."""
    if tokens == 0:
        raise RequestError("The decoder prompt cannot be empty")
    if tokens == max_model_len:
        raise RequestError(
            f"The decoder prompt (length {tokens}) plus the number of requested output tokens "
            f"(at least 1) is longer than the maximum model length of {max_model_len}. Make "
            "sure that `max_model_len` is no smaller than the number of text tokens (prompt + "
            "requested output tokens)."
        )


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
    }


def running_usage(chat: bool, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """The usage a streamed chunk carries with `continuous_usage_stats`: its prompt's tokens and
    its choice's so far, as vLLM sets them (a chat's with `completion_tokens_details` null)."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }
    if chat:
        usage["completion_tokens_details"] = None
    return usage


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
