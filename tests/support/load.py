"""Open-loop load through a VLLMService's loopback balancer, in a background thread."""

from __future__ import annotations

import asyncio
import math
import random
import threading
from typing import Any

from vllm_twin.loadgen.runner import LoadSpec, run_load
from vllm_twin.loadgen.trace import Arrival, bounded, poisson


def even_ramp(start: float, end: float, duration: float, prompt: int, output: int) -> list[Arrival]:
    """Evenly spaced arrivals whose rate rises linearly from `start` to `end` req/s: the k-th
    comes when the ramp's integral reaches k. No Poisson bursts: at a few requests per window a
    burst alone moves a window's p95, and a ramp test is about the trend."""
    if start <= 0 or end <= 0 or duration <= 0:
        raise ValueError("a ramp needs positive rates and duration")
    slope = (end - start) / duration
    total = int((start + end) / 2 * duration)

    def at(k: int) -> float:
        if slope == 0:
            return k / start
        return (math.sqrt(start * start + 2 * slope * k) - start) / slope

    return [Arrival(at(k), prompt, output) for k in range(1, total + 1)]


class BackgroundLoad:
    """Poisson arrivals at `rate`/s for `duration` s, or with `ramp_to` an even ramp from `rate`
    to `ramp_to` req/s (`even_ramp`); bounded in count and time by construction."""

    def __init__(
        self,
        url: str,
        *,
        rate: float,
        duration: float,
        prompt: int,
        output: int | tuple[int, ...],
        stream: bool = False,
        ramp_to: float | None = None,
    ) -> None:
        """`output`: the answers' length, or lengths the Poisson arrivals take in turn."""
        outputs = output if isinstance(output, tuple) else (output,)
        if ramp_to is None:
            arrivals = bounded(
                poisson(rate, [(prompt, o) for o in outputs], random.Random(7)),
                duration,
                int(rate * duration) + 1,
            )
        elif len(outputs) == 1:
            arrivals = even_ramp(rate, ramp_to, duration, prompt, outputs[0])
        else:
            raise ValueError(f"a ramp takes one output length, got {len(outputs)}")
        self.spec = LoadSpec(targets=(url,), arrivals=tuple(arrivals), stream=stream, seed=7)
        self.outcomes: list[Any] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self._stop = threading.Event()

    def _run(self) -> None:
        self.outcomes = asyncio.run(run_load(self.spec, stopped=self._stop.is_set))

    def stop(self) -> None:
        """No new request from now on; those sent run to their end (join waits for them)."""
        self._stop.set()

    def start(self) -> BackgroundLoad:
        self.thread.start()
        return self

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)

    @property
    def finished(self) -> bool:
        """Every request sent and answered (False before start)."""
        return self.thread.ident is not None and not self.thread.is_alive()
