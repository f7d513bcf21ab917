"""vLLM 0.33's before-validators of its request models that read only the raw body.

They run on the body before pydantic types it (`mode="before"` in vllm/entrypoints/openai/
completion/protocol.py and .../chat_completion/protocol.py), in vLLM's order, with its messages;
request_unserved.py types the fields they read. Where one of vLLM's assumes a type and raises (its
server's 500), these answer 400 naming the field.
"""

from __future__ import annotations

from typing import Any


class BodyError(Exception):
    """A refusal by one of vLLM's own request validators (VLLMValidationError), not pydantic's;
    like it, not a ValueError, so pydantic lets it through as it is."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.message, self.param = message, param


MAX_CACHE_SALT = 128  # _MAX_CACHE_SALT_LENGTH (vllm/entrypoints/generate/base/protocol.py)
CACHE_SALT_FORBIDDEN = frozenset("@/\\\x00")
MAX_COMPLETION_PROMPTS = 1024  # VLLM_MAX_COMPLETION_PROMPTS' default (vllm/envs.py)
NAMED_TOOL_USAGE = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`'


def check_body(data: Any, *, chat: bool) -> Any:
    """vLLM's before-validators of these fields, on the raw body, in its order."""
    if not isinstance(data, dict):
        return data
    _check_cache_salt(data.get("cache_salt"))
    _check_response_format(data.get("response_format"))
    _check_logprob_token_ids(data, chat=chat)
    _check_logprobs(data, chat=chat)
    _check_structured_outputs(data, chat=chat)
    if chat:
        _check_tool_usage(data)
        if data.get("continue_final_message") and data.get("add_generation_prompt"):
            raise BodyError(
                "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
                "continue_final_message",
            )
    else:
        _check_prompt_count(data)
    return data


def _check_cache_salt(salt: Any) -> None:
    """validate_cache_salt (vllm/entrypoints/generate/base/protocol.py)."""
    if salt is None:
        return
    if not isinstance(salt, str) or not salt:
        raise BodyError(
            "Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt"
        )
    if len(salt) > MAX_CACHE_SALT or CACHE_SALT_FORBIDDEN & set(salt):
        raise BodyError(
            f"Parameter 'cache_salt' must be at most {MAX_CACHE_SALT} characters and must not "
            "contain '@', '/', '\\\\', or NUL.",
            "cache_salt",
        )


def _check_response_format(response_format: Any) -> None:
    """validate_response_format: a json_schema format names its schema."""
    if not isinstance(response_format, dict):
        return
    if response_format.get("type") == "json_schema" and response_format.get("json_schema") is None:
        raise BodyError(
            "When response_format type is 'json_schema', the 'json_schema' field must be provided.",
            "response_format",
        )


def _check_logprob_token_ids(data: dict[str, Any], *, chat: bool) -> None:
    """vLLM's check_logprobs, first part: logprob_token_ids, and beam search with echo."""
    ids = data.get("logprob_token_ids")
    if ids and data.get("use_beam_search"):
        raise BodyError(
            "`logprob_token_ids` is not supported with beam search.", "logprob_token_ids"
        )
    if chat:
        if ids and not data.get("logprobs"):
            raise BodyError(
                "when using `logprob_token_ids`, `logprobs` must be set to true.",
                "logprob_token_ids",
            )
        return
    if data.get("use_beam_search") and data.get("echo") and data.get("logprobs") is not None:
        raise BodyError(
            "`echo` with `logprobs` is not supported with beam search because beam search does "
            "not compute prompt logprobs.",
            "echo",
        )
    if ids and data.get("echo") and data.get("max_tokens") == 0:
        raise BodyError(
            "`logprob_token_ids` is not supported when `echo=True` and `max_tokens=0` because "
            "no output tokens are generated.",
            "logprob_token_ids",
        )
    if ids and data.get("logprobs") is None:
        raise BodyError(
            "when using `logprob_token_ids`, `logprobs` must be set.", "logprob_token_ids"
        )


def _check_logprobs(data: dict[str, Any], *, chat: bool) -> None:
    """The rest of vLLM's check_logprobs: prompt_logprobs and logprobs (top_logprobs for chat)
    are numbers, -1 or at least 0, no prompt logprobs when streaming, and chat's top_logprobs
    only with logprobs."""
    name = "top_logprobs" if chat else "logprobs"
    for field in ("prompt_logprobs", name):
        value = data.get(field)
        if value is not None and not isinstance(value, int | float):
            raise BodyError(f"`{field}` must be an integer.", field)
    prompt_logprobs = data.get("prompt_logprobs")
    if prompt_logprobs is not None:
        if data.get("stream") and (prompt_logprobs > 0 or prompt_logprobs == -1):
            raise BodyError(
                "`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs"
            )
        if prompt_logprobs < 0 and prompt_logprobs != -1:
            raise BodyError("`prompt_logprobs` must be a positive value or -1.", "prompt_logprobs")
    value = data.get(name)
    if value is not None and value < 0 and value != -1:
        raise BodyError(f"`{name}` must be a positive value or -1.", name)
    if chat and value is not None and value != 0 and not data.get("logprobs"):
        raise BodyError("when using `top_logprobs`, `logprobs` must be set to true.", name)


def _check_structured_outputs(data: dict[str, Any], *, chat: bool) -> None:
    """check_structured_outputs_count: one of json, regex and choice, and not with a named tool."""
    kwargs = data.get("structured_outputs")
    if kwargs is None:
        return
    if not isinstance(kwargs, dict):  # vLLM's validator calls .get on it: a 500 there
        raise BodyError("structured_outputs must be an object.", "structured_outputs")
    count = sum(kwargs.get(kind) is not None for kind in ("json", "regex", "choice"))
    if count > 1:
        raise BodyError(
            "You can only use one kind of constraints for structured outputs ('json', 'regex' "
            "or 'choice').",
            "structured_outputs",
        )
    if chat and count > 0 and data.get("tool_choice", "none") not in ("none", "auto", "required"):
        raise BodyError(
            "You can only either use constraints for structured outputs or tools, not both.",
            "structured_outputs",
        )


def _check_tool_usage(data: dict[str, Any]) -> None:
    """check_tool_usage (chat): tools not empty, and a tool_choice that names one of them."""
    tools = data.get("tools")
    if tools == []:
        raise BodyError(
            "`tools` must not be an empty array. Either provide at least one tool or omit the "
            "field entirely.",
            "tools",
        )
    choice = data.get("tool_choice", "auto" if tools else None)
    if choice is None or choice == "none":
        return
    if tools is None:
        raise BodyError("When using `tool_choice`, `tools` must be set.", "tool_choice")
    if choice in ("auto", "required"):
        return
    if not isinstance(choice, dict):
        raise BodyError(
            f'Invalid value for `tool_choice`: {choice}! Only named tools, "none", "auto" '
            'or "required" are supported.',
            "tool_choice",
        )
    function = choice.get("function")
    if not isinstance(function, dict):
        raise BodyError(
            f"Invalid value for `function`: `{function}` in `tool_choice`! {NAMED_TOOL_USAGE}",
            "tool_choice.function",
        )
    if "name" not in function:
        raise BodyError(
            f"Expected field `name` in `function` in `tool_choice`! {NAMED_TOOL_USAGE}",
            "tool_choice.function.name",
        )
    name = function["name"]
    if not isinstance(name, str) or not name:
        raise BodyError(
            f"Invalid `name` in `function`: `{name}` in `tool_choice`! {NAMED_TOOL_USAGE}",
            "tool_choice.function.name",
        )
    if not isinstance(tools, list) or not all(_tool_name(tool) is not None for tool in tools):
        raise BodyError("tools must be a list of function tools with names.", "tools")
    if name not in (_tool_name(tool) for tool in tools):
        raise BodyError(
            "The tool specified in `tool_choice` does not match any of the specified `tools`",
            "tool_choice",
        )


def _tool_name(tool: Any) -> Any:
    function = tool.get("function") if isinstance(tool, dict) else None
    return function.get("name") if isinstance(function, dict) else None


def _check_prompt_count(data: dict[str, Any]) -> None:
    """validate_prompt_list_length: a batch of at most VLLM_MAX_COMPLETION_PROMPTS prompts, or
    of prompt embeddings."""
    prompt = data.get("prompt")
    # is_list_of(prompt, int) reads the first element only
    if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
        _check_count(len(prompt), "prompt")
    embeds = data.get("prompt_embeds")
    if isinstance(embeds, list):
        _check_count(len(embeds), "prompt_embeds")


def _check_count(count: int, name: str) -> None:
    if count > MAX_COMPLETION_PROMPTS:
        raise BodyError(
            f"{name} list length {count} exceeds the maximum allowed count of "
            f"{MAX_COMPLETION_PROMPTS}. To increase this limit, set the "
            "VLLM_MAX_COMPLETION_PROMPTS environment variable.",
            name,
        )
