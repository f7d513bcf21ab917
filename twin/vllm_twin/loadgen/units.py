"""Durations on the command line: `30s`, `500ms`, `2m`, `1h` or a bare number of seconds."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)?")


def parse_duration(text: str) -> float:
    """Seconds in `text`; raises ValueError on anything else (negative values included)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"invalid duration {text!r}: use e.g. 30s, 500ms, 2m or 1.5")
    number, unit = match.groups()
    return float(number) * _UNITS[unit or "s"]
