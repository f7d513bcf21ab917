"""Retry schedule for 503 answers: capped exponential backoff with full jitter.

vLLM answers overload with 503 and no Retry-After (docs/vllm-0.33.md §2.2), so the client picks the
wait. Full jitter (a uniform draw below the capped exponential) keeps retrying clients from
arriving in lock-step; the deadline bounds the time one request may spend retrying.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    deadline: float  # seconds after the first attempt after which no retry starts
    base: float  # first backoff ceiling
    cap: float  # largest backoff ceiling

    def __post_init__(self) -> None:
        # named by loadgen's flags, the only place a policy comes from
        if not self.deadline >= 0:
            raise ValueError(f"--retry-deadline must be >= 0, got {self.deadline:g}s")
        if not 0 < self.base <= self.cap:
            raise ValueError(
                f"--backoff-base must be > 0 and <= --backoff-max, got {self.base:g}s "
                f"and {self.cap:g}s"
            )

    def ceiling(self, retry: int) -> float:
        """Upper bound of the wait before retry number `retry` (0-based)."""
        # 2**retry overflows float for large counts long after the cap applies; clamp early
        return min(self.cap, self.base * 2.0 ** min(retry, 62))

    def next_delay(self, retry: int, elapsed: float, rng: random.Random) -> float | None:
        """Wait before retry number `retry`, or None when it would start past the deadline.

        `elapsed` is the time since the first attempt, attempts and earlier waits included.
        """
        delay = rng.uniform(0.0, self.ceiling(retry))
        if elapsed + delay > self.deadline:
            return None
        return delay

    def delays(self, rng: random.Random) -> Iterator[float]:
        """The schedule of waits alone, as if every attempt took no time."""
        elapsed = 0.0
        retry = 0
        while (delay := self.next_delay(retry, elapsed, rng)) is not None:
            elapsed += delay
            retry += 1
            yield delay
