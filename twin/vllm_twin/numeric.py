"""Numeric command-line values: finite and within bounds, or a one-line argparse error.

`float("inf")`, `float("nan")` and 1e300 parse as floats, and a rate or a duration built on them
makes a schedule that never ends; every numeric flag of `simulate` and `loadgen` goes through
these instead. MAX_SCHEDULED caps how many requests one run may schedule.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Final

MAX_SCHEDULED: Final = 1_000_000
DAY: Final = 86400.0
WEEK: Final = 7 * DAY
INT32_MAX: Final = 2**31 - 1


def check_number(value: float, low: float, high: float, *, open_low: bool = False) -> float:
    """`value` when finite and in [low, high] ((low, high] with open_low); ArgumentTypeError."""
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {value}")
    if value < low or (open_low and value == low) or value > high:
        bracket = "(" if open_low else "["
        raise argparse.ArgumentTypeError(f"must be in {bracket}{low:g}, {high:g}], got {value:g}")
    return value


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


def bounded_seconds(
    parse: Callable[[str], float], high: float, *, low: float = 0.0, open_low: bool = True
) -> Callable[[str], float]:
    """A duration flag: `parse` reads it (e.g. "500ms"), then the bounds apply."""

    def seconds(text: str) -> float:
        try:
            value = parse(text)
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise argparse.ArgumentTypeError(str(exc) or f"not a duration: {text!r}") from None
        return check_number(value, low, high, open_low=open_low)

    return seconds


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
