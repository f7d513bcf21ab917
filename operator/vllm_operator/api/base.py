"""Model bases shared by the v1alpha1 API: camelCase on the wire, snake_case in Python."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, field_validator
from pydantic.alias_generators import to_camel

# The API server stores CRD integers as int64, and a Deployment's replicas as int32.
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
INT32_MAX: Final = 2**31 - 1


class SpecModel(BaseModel):
    """A part of `spec`: an unknown field is an error, so a typo is never silently dropped.

    Strict, as the API server is: "8" is not an integer, "yes" and 1 are not booleans.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        strict=True,
    )

    @field_validator("*", mode="before")
    @classmethod
    def _fits_int64(cls, value: Any) -> Any:
        out_of_range = isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX
        if out_of_range and not isinstance(value, bool):
            raise ValueError("integer out of range: it must fit in 64 bits")
        return value


class StatusModel(BaseModel):
    """A part of `status`: tolerant of fields written by newer operator versions."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
    )

    @field_validator("*", mode="after")
    @classmethod
    def _utc(cls, value: Any) -> Any:
        # A time written without a zone (by hand, by another tool: `format: date-time` lets
        # "2026-11-29T12:00:00" through) is read as UTC, as the operator writes its own; a naive
        # datetime would fail every comparison with the operator's aware clock.
        if isinstance(value, list | tuple) and any(map(_naive, value)):
            return type(value)(map(_aware, value))
        return _aware(value)


def _naive(value: Any) -> bool:
    return isinstance(value, datetime) and value.tzinfo is None


def _aware(value: Any) -> Any:
    return value.replace(tzinfo=UTC) if _naive(value) else value
