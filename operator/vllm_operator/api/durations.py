"""Durations: one syntax for the API and every command line; and the API's timestamps.

Go-style duration strings as the API server and kubectl write them: a number and a unit, one or
more times (`500ms`, `1.5s`, `1m30s`; units ns, us, ms, s, m, h; no sign, no spaces). Command
lines (`vllm-twin simulate`, `loadgen`) also take a bare number as seconds (`--duration 600`);
the API does not, because `itlP95: 60` reads as milliseconds to some and seconds to others.
"""

from __future__ import annotations

import argparse
import re
from datetime import datetime
from typing import Annotated, Any, Final

from pydantic import AfterValidator, Field

# Units in the order the regex must try them: "ms" before "m", "ns"/"us" before "s".
_UNIT_SECONDS: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_NUMBER: Final = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_UNIT: Final = "(?:ns|us|ms|s|m|h)"
# The same text is the CRD `pattern` (Go RE2) and the Python check, so both sides agree.
DURATION_PATTERN: Final = rf"^(?:{_NUMBER}{_UNIT})+$"
_PART: Final = re.compile(rf"({_NUMBER})({_UNIT})")

DURATION_HELP: Final = "a duration such as 500ms, 1.5s or 1m30s (units ns, us, ms, s, m, h)"


def parse_duration(text: str, *, bare_seconds: bool = False) -> float:
    """Seconds in `text`; ValueError names the accepted form when it is not a duration.

    `bare_seconds` (command lines) also takes a plain number as seconds.
    """
    if bare_seconds and re.fullmatch(_NUMBER, text):
        return float(text)
    if not re.fullmatch(DURATION_PATTERN, text):
        accepted = f"{DURATION_HELP}, or a number of seconds" if bare_seconds else DURATION_HELP
        raise ValueError(f"{text!r} is not {accepted}")
    return sum(float(num) * _UNIT_SECONDS[unit] for num, unit in _PART.findall(text))


def duration_arg(text: str) -> float:
    """argparse `type` for a duration option: parse_duration with bare seconds."""
    try:
        return parse_duration(text, bare_seconds=True)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _check(text: str) -> str:
    parse_duration(text)
    return text


# Kept as the user's string on the wire (GitOps diffs stay clean); read seconds via parse_duration.
Duration = Annotated[
    str,
    AfterValidator(_check),
    Field(max_length=32, json_schema_extra={"pattern": DURATION_PATTERN}),
]


def parse_kube_time(value: Any) -> datetime | None:
    """An API timestamp (RFC 3339 as the API server writes it, `2026-12-01T10:00:00Z`, with or
    without fractional seconds) as an aware datetime; None for anything else, so a missing or
    malformed stamp on an object someone else wrote is "unknown", not a crash."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None
