"""Go-style duration strings (`500ms`, `1.5s`, `1m30s`) as the API server and kubectl write them."""

from __future__ import annotations

import re
from typing import Annotated, Final

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


def parse_duration(text: str) -> float:
    """Seconds in `text`; ValueError names the accepted form when it is not a duration."""
    if not re.fullmatch(DURATION_PATTERN, text):
        raise ValueError(f"{text!r} is not {DURATION_HELP}")
    return sum(float(num) * _UNIT_SECONDS[unit] for num, unit in _PART.findall(text))


def _check(text: str) -> str:
    parse_duration(text)
    return text


# Kept as the user's string on the wire (GitOps diffs stay clean); read seconds via parse_duration.
Duration = Annotated[
    str,
    AfterValidator(_check),
    Field(max_length=32, json_schema_extra={"pattern": DURATION_PATTERN}),
]
