"""What the benchmarks' command lines share: number flags refused in one line, and runs spread
over processes with a progress line each."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

R = TypeVar("R")


def positive_numbers(text: str, flag: str) -> list[float]:
    """`text` ("1,2.5,4") as positive finite numbers; SystemExit naming `flag` otherwise."""
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        raise SystemExit(f"{flag}: expected comma-separated numbers, got {text!r}") from None
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise SystemExit(f"{flag}: every value must be a positive number, got {text!r}")
    return values


def whole_numbers(text: str, flag: str) -> list[int]:
    """`text` as positive whole numbers, each once, in order; SystemExit naming `flag`."""
    values = positive_numbers(text, flag)
    if not all(v == int(v) for v in values):
        raise SystemExit(f"{flag}: whole numbers only, got {text!r}")
    return sorted({int(v) for v in values})


def at_least_one_job(jobs: int) -> int:
    """--jobs, refused in one line below 1."""
    if jobs < 1:
        raise SystemExit(f"--jobs: at least 1, got {jobs}")
    return jobs


def run_all(
    fn: Callable[..., R],
    jobs: Sequence[tuple[Any, ...]],
    workers: int,
    describe: Callable[[R], str],
) -> list[R]:
    """fn(*job) for every job on `workers` processes, the results in the jobs' order; a line
    `[k/n] describe(result)` on stderr as each one comes (a long benchmark shows progress)."""
    out: list[R] = []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(fn, *job) for job in jobs]
        for k, future in enumerate(futures, 1):
            out.append(future.result())
            print(f"[{k}/{len(futures)}] {describe(out[-1])}", file=sys.stderr, flush=True)
    return out
