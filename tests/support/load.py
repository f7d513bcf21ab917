"""Open-loop load through a VLLMService's loopback balancer, in a background thread."""

from __future__ import annotations

import asyncio
import random
import threading
from typing import Any

from vllm_twin.loadgen.runner import LoadSpec, run_load
from vllm_twin.loadgen.trace import bounded, poisson


class BackgroundLoad:
    """Poisson arrivals at `rate`/s for `duration` s; bounded in count and time by construction."""

    def __init__(
        self,
        url: str,
        *,
        rate: float,
        duration: float,
        prompt: int,
        output: int,
        stream: bool = False,
    ) -> None:
        arrivals = bounded(
            poisson(rate, [(prompt, output)], random.Random(7)), duration, int(rate * duration) + 1
        )
        self.spec = LoadSpec(targets=(url,), arrivals=tuple(arrivals), stream=stream, seed=7)
        self.outcomes: list[Any] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.outcomes = asyncio.run(run_load(self.spec))

    def start(self) -> BackgroundLoad:
        self.thread.start()
        return self

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)
