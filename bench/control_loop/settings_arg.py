"""`--settings name=value,...`: the control loop's constants (TuningSettings) for our policies.

The bench runs the same decide() as the operator with TuningSettings' defaults; this flag runs it
with other values, so that a trade (more windows in SLO for more GPU-hours, a faster scale-down
for fewer) is measured with one command rather than argued. Durations are given in seconds.
Only our policies (ours-*) read it: the baselines have no such constants.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import timedelta
from typing import TypeAlias

from vllm_operator.tuning.settings import TuningSettings

FLAG = "--settings"
Overrides: TypeAlias = dict[str, float | int | timedelta]
_DEFAULTS = TuningSettings()
_FIELDS = {f.name: type(getattr(_DEFAULTS, f.name)) for f in dataclasses.fields(TuningSettings)}


def _value(name: str, text: str) -> float | int | timedelta:
    kind = _FIELDS[name]
    try:
        if kind is int:
            return int(text)
        number = float(text)
    except ValueError:
        seconds = " of seconds" if kind is timedelta else ""
        unit = "an integer" if kind is int else f"a number{seconds}"
        raise SystemExit(f"{FLAG}: {name} needs {unit}, got {text!r}") from None
    if not math.isfinite(number):
        raise SystemExit(f"{FLAG}: {name} needs a finite number, got {text!r}")
    if kind is timedelta:
        if number < 0:
            raise SystemExit(f"{FLAG}: {name} needs seconds >= 0, got {text!r}")
        return timedelta(seconds=number)
    return number


def parse_settings(text: str | None) -> Overrides:
    """The overrides `text` names ("a=1,b=2"), checked together as TuningSettings checks them;
    SystemExit with one line naming the flag and the value otherwise."""
    if not text:
        return {}
    out: Overrides = {}
    for item in text.split(","):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not name or not value:
            raise SystemExit(f"{FLAG}: {item!r} is not name=value (e.g. forecast_headroom=0.8)")
        if name not in _FIELDS:
            raise SystemExit(f"{FLAG}: no setting named {name!r}; known: {', '.join(_FIELDS)}")
        if name in out:
            raise SystemExit(f"{FLAG}: {name} given twice")
        out[name] = _value(name, value)
    try:
        dataclasses.replace(_DEFAULTS, **out)
    except ValueError as e:  # TuningSettings' own checks, e.g. headroom <= forecast_headroom
        raise SystemExit(f"{FLAG}: {e}") from None
    return out


def with_overrides(settings: TuningSettings, overrides: Overrides | None) -> TuningSettings:
    return dataclasses.replace(settings, **overrides) if overrides else settings
