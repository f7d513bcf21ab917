"""The fields of vLLM 0.33's request models that the twin types but does not serve.

A twin that accepted `"truncation_side": 5` or `"tools": "x"` would answer 200 where vLLM
answers 400, so every field of `CompletionRequest` (vllm/entrypoints/openai/completion/
protocol.py) and `ChatCompletionRequest` (.../chat_completion/protocol.py) is typed here as
vLLM types it, nested objects (response formats, tools, structured outputs) included; vLLM's
before-validators of them are request_checks.py's. What the twin does with them: nothing (no
tools are called, no output is constrained); `truncate_prompt_tokens` alone changes what is
served (openai.engine_prompts), and a `response_format` that leaves no constraint is refused
after admission as vLLM's to_sampling_params refuses it (`constraint_problem`).

Not reproduced: the structural-tag payload check, which needs xgrammar
(`validate_structural_tag_payload`). The parity tier sends every field of vLLM's models with
values of every JSON kind to both (tests/parity/test_vllm_request_fields.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from vllm_twin.server.request_checks import BodyError

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class _Open(BaseModel):
    """vLLM's OpenAIBaseModel: unknown keys are kept, not refused."""

    model_config = ConfigDict(extra="allow")


class JsonSchemaResponseFormat(_Open):
    name: str
    description: str | None = None
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Open):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaResponseFormat | None = None


class StructuralTagResponseFormat(_Open):
    type: Literal["structural_tag"]
    format: Any


class LegacyStructuralTag(_Open):
    begin: str
    structural_tag_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    end: str


class LegacyStructuralTagResponseFormat(_Open):
    type: Literal["structural_tag"]
    structures: list[LegacyStructuralTag]
    triggers: list[str]


AnyResponseFormat = ResponseFormat | StructuralTagResponseFormat | LegacyStructuralTagResponseFormat


@dataclass
class StructuredOutputsParams:
    """vllm/sampling_params.py's dataclass: exactly one kind of constraint."""

    json: str | dict[Any, Any] | None = None
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None
    disable_any_whitespace: bool = False
    disable_additional_properties: bool = False
    whitespace_pattern: str | None = None
    structural_tag: str | None = None

    def __post_init__(self) -> None:
        kinds = (self.json, self.regex, self.choice, self.grammar, self.json_object)
        count = sum(kind is not None for kind in (*kinds, self.structural_tag))
        # vLLM's message quotes its instance's __dict__, two private fields included
        state = {**vars(self), "_backend": None, "_backend_was_auto": False}
        if count > 1:
            raise ValueError(
                "You can only use one kind of structured outputs constraint but multiple are "
                f"specified: {state}"
            )
        if count < 1:
            raise ValueError(
                f"You must use one kind of structured outputs constraint but none are specified: "
                f"{state}"
            )


@dataclass
class RepetitionDetectionParams:
    """vllm/sampling_params.py's dataclass, with its checks."""

    max_pattern_size: int = 0
    min_pattern_size: int = 0
    min_count: int = 0

    def __post_init__(self) -> None:
        if (
            self.max_pattern_size < 0
            or self.min_pattern_size < 0
            or self.min_pattern_size > self.max_pattern_size
        ):
            raise ValueError(
                "max_pattern_size, min_pattern_size must be >=0, with min_pattern_size <= "
                "max_pattern_size. Set both to 0 to disable repetitive pattern detection."
            )
        if self.max_pattern_size > 0 and self.min_count < 2:
            raise ValueError(
                "min_count must be >= 2 to detect repetitive patterns in engine output. If you "
                "do not wish to detect repetitive patterns, set max_pattern_size to 0."
            )


def constraint_problem(body: UnservedFields) -> str | None:
    """What `structured_outputs_from_response_format` (vllm/entrypoints/generate/base/
    protocol.py) refuses as to_sampling_params merges response_format into structured_outputs:
    none or several constraints once merged. None where it takes them."""
    response_format = body.response_format
    if response_format is None or response_format.type == "text":
        return None
    overrides: dict[str, Any]
    if isinstance(response_format, ResponseFormat) and response_format.type == "json_object":
        overrides = {"json_object": True}
    elif isinstance(response_format, ResponseFormat):
        schema = response_format.json_schema  # present: check_body refused it missing
        overrides = {"json": schema.json_schema if schema is not None else None}
    else:
        overrides = {"structural_tag": json.dumps(response_format.model_dump(by_alias=True))}
    try:
        if body.structured_outputs is None:
            StructuredOutputsParams(**overrides)
        else:
            replace(body.structured_outputs, **overrides)
    except ValueError as exc:
        return str(exc)
    return None


def _thinking_budget(value: Any) -> Any:
    """validate_thinking_token_budget (vllm/sampling_params.py): an integer >= -1; -1 is none."""
    if value is None:
        return None
    if isinstance(value, bool | float) or not isinstance(value, int) or value < -1:
        raise BodyError(
            "`thinking_token_budget` must be a non-negative integer or -1 for unlimited.",
            "thinking_token_budget",
        )
    return None if value == -1 else value


XargValue = str | int | float | list[str | int | float]


class UnservedFields(BaseModel):
    """The fields both request kinds have and the twin does not serve, typed as vLLM types them."""

    model_config = ConfigDict(extra="allow")
    watermarking: bool | None = None
    truncate_prompt_tokens: Annotated[int, Field(ge=-1, le=INT64_MAX)] | None = None
    truncation_side: Literal["left", "right"] | None = None
    allowed_token_ids: list[int] | None = None
    logprob_token_ids: list[int] | None = None
    bad_words: list[str] = Field(default_factory=list)
    response_format: AnyResponseFormat | None = None
    structured_outputs: StructuredOutputsParams | None = None
    request_id: str = ""
    session_id: str | None = None
    return_tokens_as_token_ids: bool | None = None
    return_token_ids: bool | None = None
    return_weight_versions: bool = False
    routed_experts_prompt_start: Annotated[int, Field(ge=0)] = 0
    return_token_offsets: bool | None = False
    mm_payload: Literal["tensors", "none"] = "tensors"
    return_mm_kwargs: bool | None = None
    cache_salt: Annotated[str, Field(min_length=1, max_length=1024)] | None = None
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
    vllm_xargs: dict[str, XargValue] | None = None
    repetition_detection: RepetitionDetectionParams | None = None
    thinking_token_budget: Annotated[int | None, BeforeValidator(_thinking_budget)] = None
    stream_interval: Annotated[int, Field(ge=1)] | None = None


class CompletionUnserved(UnservedFields):
    prompt_embeds: bytes | list[bytes] | None = None
    add_special_tokens: bool = True


class FunctionDefinition(_Open):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    defer_loading: bool | None = None


class ChatCompletionToolsParam(_Open):
    type: Literal["function"] = "function"
    function: FunctionDefinition
    defer_loading: bool | None = None


class ChatCompletionNamedFunction(_Open):
    name: str


class ChatCompletionNamedToolChoiceParam(_Open):
    function: ChatCompletionNamedFunction
    type: Literal["function"] = "function"


ToolChoice = Literal["none", "auto", "required"] | ChatCompletionNamedToolChoiceParam | None
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]


class ChatUnserved(UnservedFields):
    tools: list[ChatCompletionToolsParam] | None = None
    tool_choice: ToolChoice = "none"
    reasoning_effort: ReasoningEffort | None = None
    include_reasoning: bool = True
    parallel_tool_calls: bool | None = True
    echo: bool = False
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    add_special_tokens: bool = False
    documents: list[dict[str, str]] | None = None
    chat_template: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    media_io_kwargs: dict[str, dict[str, Any]] | None = None
    mm_processor_kwargs: dict[str, Any] | None = None
    return_prompt_text: bool | None = None
