"""Numeric command-line values: finite and within bounds, or a one-line argparse error.

`float("inf")`, `float("nan")` and 1e300 parse as floats, and a rate or a duration built on them
makes a schedule that never ends; every numeric flag of `simulate` and `loadgen` goes through
these instead. MAX_SCHEDULED caps how many requests one run may schedule.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from typing import Any, Final

from vllm_operator.cli import DAY, check_number

MAX_SCHEDULED: Final = 1_000_000
WEEK: Final = 7 * DAY
INT32_MAX: Final = 2**31 - 1


def bounded_float(low: float, high: float, *, open_low: bool = False) -> Callable[[str], float]:
    def number(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        return check_number(value, low, high, open_low=open_low)

    return number


def bounded_int(low: int, high: int, parse: Callable[[str], int] = int) -> Callable[[str], int]:
    def integer(text: str) -> int:
        try:
            value = parse(text)
        except (ValueError, argparse.ArgumentTypeError):
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in [{low}, {high}], got {value}")
        return value

    return integer


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite_or_none(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(item) for item in value]
    return value


def json_text(value: Any) -> str:
    """`value` as indented JSON, NaN and inf as null (a percentile of nothing completed is NaN,
    which JSON has no spelling for)."""
    return json.dumps(_finite_or_none(value), indent=2, allow_nan=False)


def check_schedule_size(expected: float, what: str) -> None:
    """Refuse a run that would schedule more than MAX_SCHEDULED requests (expected count)."""
    from vllm_operator.cli import UsageError

    if not expected <= MAX_SCHEDULED:
        raise UsageError(
            f"{what} would schedule about {expected:.3g} requests; at most {MAX_SCHEDULED:,} "
            "per run (lower the rate or the duration)"
        )


def add_closed_loop_counts(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, num_prompts: int
) -> None:
    """`--num-prompts` and `--warmup` of a closed loop, as simulate and loadgen both take them."""
    parser.add_argument(
        "--num-prompts",
        type=bounded_int(1, MAX_SCHEDULED),
        default=num_prompts,
        help="closed loop: counted requests",
    )
    parser.add_argument(
        "--warmup",
        type=bounded_int(0, MAX_SCHEDULED),
        default=0,
        help="closed loop: uncounted first requests",
    )
