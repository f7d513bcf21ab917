"""The types vLLM 0.33's request models give the fields of a completion or chat request.

vLLM validates a body with pydantic models (`CompletionRequest`,
vllm/entrypoints/openai/completion/protocol.py; `ChatCompletionRequest`,
.../chat_completion/protocol.py) before it serves it: `"temperature": "hot"` is a 400, and so
is `"n": null`, while pydantic's lax mode takes `"max_tokens": "5"` and `5.0` as 5. The twin
checks the same fields with the same types, with pydantic too, so it refuses and accepts what
vLLM does for them; the rest of vLLM's fields (tools, response formats, ...) are typed by
request_unserved.py and their validators are request_checks.py's. Unknown fields are accepted,
as vLLM accepts them.
What vLLM's SamplingParams refuse later (a temperature of 3, an empty stop string) is
sampling.py's.
The parity tier compares these verdicts with vLLM's own models
(tests/parity/test_vllm_requests.py).

`messages` is checked by openai.py, which also counts the prompt's tokens.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from vllm_twin.server.request_checks import BodyError, check_body
from vllm_twin.server.request_unserved import (
    INT64_MAX,
    INT64_MIN,
    ChatUnserved,
    CompletionUnserved,
    UnservedFields,
)

__all__ = ["BodyError", "ChatBody", "CompletionBody", "first_problem", "validate_body"]

Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]
MAX_STOP_STRINGS = 128  # VLLM_MAX_STOP_STRINGS' default (vllm/envs.py)
Stop = str | Annotated[list[str], Field(max_length=MAX_STOP_STRINGS)] | None
# top_logprobs: null means omitted (vllm/entrypoints/generate/base/protocol.py)
TopLogprobs = Annotated[int, BeforeValidator(lambda v: 0 if v is None else v)]


class StreamOptions(BaseModel):  # vLLM's name: its type errors say it
    model_config = ConfigDict(extra="allow")
    include_usage: bool | None = False
    continuous_usage_stats: bool | None = False


class _Sampling(UnservedFields):
    """The fields both request kinds share, typed as vLLM types them."""

    model_config = ConfigDict(extra="allow")
    model: str | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    presence_penalty: float | None = None
    seed: Int64 | None = None
    stop: Stop = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    temperature: float | None = None
    top_p: float | None = None
    user: str | None = None
    use_beam_search: bool = False
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    length_penalty: float = 1.0
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    min_tokens: int = 0
    skip_special_tokens: bool | None = None
    spaces_between_special_tokens: bool = True
    prompt_logprobs: int | None = None
    priority: Int64 = 0


TokenId = Annotated[int, Field(ge=0)]


class CompletionBody(_Sampling, CompletionUnserved):
    prompt: list[TokenId] | list[list[TokenId]] | str | list[str] | None = None
    echo: bool | None = False
    logprobs: int | None = None
    max_tokens: int | None = 16  # the OpenAI completions default, which vLLM keeps
    n: int = 1
    suffix: str | None = None

    _checks = model_validator(mode="before")(lambda data: check_body(data, chat=False))


class ChatBody(_Sampling, ChatUnserved):
    logprobs: bool | None = False
    top_logprobs: TopLogprobs = 0
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    n: int | None = 1

    _checks = model_validator(mode="before")(lambda data: check_body(data, chat=True))


def first_problem(exc: ValidationError) -> tuple[str, str]:
    """The first error as (`field.path`, one-line message), counting the others."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    more = exc.error_count() - 1
    message = f"{where}: {error['msg']}" + (f" (and {more} more)" if more else "")
    return where, message


def validate_body(body: Any, *, chat: bool) -> CompletionBody | ChatBody:
    """The body as vLLM's request model types it; ValidationError where vLLM's refuses it."""
    model = ChatBody if chat else CompletionBody
    return model.model_validate(body)
