"""Turn pydantic errors into the one-line, field-named messages users see."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from pydantic import ValidationError
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from vllm_operator.api.spec import RULES_ERROR
from vllm_operator.api.v1alpha1 import VLLMService


class InvalidSpecError(ValueError):
    """A VLLMService that the API server would refuse too; `messages` has one line per problem."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("\n".join(messages))
        self.messages = messages


# Input given by Python name (populate_by_name) reports snake_case locations; wire names never
# contain "_", so only those parts are converted and map keys such as "H100-80GB" stay intact.
_SNAKE: Final = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)+")

# Pydantic's wording, rephrased where a user would not know what it means.
_REWORDED = {
    "extra_forbidden": "unknown field",
    "missing": "required field is missing",
}


def format_location(loc: tuple[int | str, ...]) -> str:
    """('spec', 'budgets', 'max_seqs') -> 'spec.budgets.maxSeqs'; list indexes as [i]."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + (to_camel(part) if _SNAKE.fullmatch(part) else part)
    return out


def error_message(err: ErrorDetails) -> str:
    """The message of one pydantic error, in the words users see."""
    return _REWORDED.get(err["type"], err["msg"]).removeprefix("Value error, ")


def format_validation_error(exc: ValidationError, prefix: tuple[str, ...] = ()) -> list[str]:
    """One line per problem: `<camelCase path>: <message>`, or a rule's own field-named message.

    `prefix` is prepended to every location, e.g. ("spec",) when a bare spec was validated.
    """
    lines: list[str] = []
    for err in exc.errors():
        if err["type"] == RULES_ERROR:
            lines.extend(err["ctx"]["messages"])
            continue
        message = error_message(err)
        where = format_location((*prefix, *err["loc"]))
        if where == "metadata" and message.startswith("metadata."):
            lines.append(message)  # the message names the field already
        else:
            lines.append(f"{where}: {message}" if where else message)
    return lines


def parse_vllmservice(obj: Mapping[str, Any]) -> VLLMService:
    """Validate a VLLMService object; InvalidSpecError lists every problem by field."""
    try:
        return VLLMService.model_validate(obj)
    except ValidationError as exc:
        raise InvalidSpecError(format_validation_error(exc)) from None
