"""The API server's CPU in front of the engine core: shared by every request it is working on.

vLLM's API server is one asyncio loop: the handlers of the requests it has taken (parsing, the
chat template, tokenisation) take turns on it, so N requests that arrive together share it and
all reach the engine core at about N x the cost of one, not one cost apart. That is processor
sharing, and it is what the GPUStack bursts show (docs/twin-calibration.md §2.3): 1000 chat
requests of 128 prompt tokens get their first token between ~14 s and 22.6 s (median 18 s), and
then their tokens 0.6 s apart, the time of a full 8192-token prefill step, which a server that
handed them to the engine one by one would never fill.

`ApiServer` keeps the requests in work and `take(t)` returns those done by `t` with the time each
was done; time only moves forward. It counts the CPU seconds every job in work has received so
far (`_served`: with n jobs, 1/n of each wall second): a job that arrives needing `work` is done
when that count reaches its arrival's count plus `work`, so the next one done is the least such
mark, kept on a heap. A burst of n requests costs O(n log n), not the O(n^2) of charging every
job its share at every finish. Jobs of equal cost that arrive together finish together, in
arrival order. Pure: no clock, no I/O.
"""

from __future__ import annotations

import heapq
from typing import Generic, TypeVar

T = TypeVar("T")


class ApiServer(Generic[T]):
    def __init__(self) -> None:
        self._marks: list[tuple[float, int]] = []  # (CPU count at which it is done, sequence)
        self._items: dict[int, T] = {}  # the jobs in work; a removed one leaves a stale mark
        self._seq = 0
        self._served = 0.0  # CPU seconds each job in work since the start has received
        self._t = 0.0

    def __len__(self) -> int:
        return len(self._items)

    def _least(self) -> float | None:
        while self._marks and self._marks[0][1] not in self._items:
            heapq.heappop(self._marks)  # a removed job's mark
        return self._marks[0][0] if self._marks else None

    def next_finish(self) -> float | None:
        """When the next job is done if nothing else arrives; None when there is none."""
        least = self._least()
        if least is None:
            return None
        return self._t + (least - self._served) * len(self._items)

    def add(self, now: float, work: float, item: T) -> list[tuple[float, T]]:
        """A request arrives at `now` needing `work` CPU seconds; returns what `take` would."""
        done = self.take(now)
        heapq.heappush(self._marks, (self._served + work, self._seq))
        self._items[self._seq] = item
        self._seq += 1
        return done

    def take(self, now: float) -> list[tuple[float, T]]:
        """Run the shared CPU up to `now`; the jobs finished by then, in finishing order."""
        out: list[tuple[float, T]] = []
        while (least := self._least()) is not None:
            n = len(self._items)
            finish = self._t + (least - self._served) * n
            if finish > now:
                self._served += (now - self._t) / n
                break
            while self._marks and self._marks[0][0] == least:
                _, seq = heapq.heappop(self._marks)
                if seq in self._items:
                    out.append((finish, self._items.pop(seq)))
            self._served, self._t = least, finish
        self._t = max(self._t, now)
        return out

    def remove(self, item: T) -> bool:
        """Drop a job (its client went away); the others share the CPU without it."""
        for seq, held in self._items.items():
            if held is item:
                del self._items[seq]
                return True
        return False
