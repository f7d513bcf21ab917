"""The API server's CPU in front of the engine core: shared by every request it is working on.

vLLM's API server is one asyncio loop: the handlers of the requests it has taken (parsing, the
chat template, tokenisation) take turns on it, so N requests that arrive together share it and
all reach the engine core at about N x the cost of one, not one cost apart. That is processor
sharing, and it is what the GPUStack bursts show (docs/twin-calibration.md §2.3): 1000 chat
requests of 128 prompt tokens get their first token between ~14 s and 22.6 s (median 18 s), and
then their tokens 0.6 s apart, the time of a full 8192-token prefill step, which a server that
handed them to the engine one by one would never fill.

`ApiServer` keeps the requests in work with the CPU time each still needs; time only moves
forward, and `take(t)` returns those done by `t` with the time each was done. Jobs of equal
cost finish in arrival order. Pure: no clock, no I/O.
"""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class ApiServer(Generic[T]):
    def __init__(self) -> None:
        self._jobs: list[list[float | int]] = []  # [remaining CPU seconds, sequence]
        self._items: dict[int, T] = {}
        self._seq = 0
        self._t = 0.0

    def __len__(self) -> int:
        return len(self._jobs)

    def next_finish(self) -> float | None:
        """When the next job is done if nothing else arrives; None when there is none."""
        if not self._jobs:
            return None
        least = min(float(j[0]) for j in self._jobs)
        return self._t + least * len(self._jobs)

    def add(self, now: float, work: float, item: T) -> list[tuple[float, T]]:
        """A request arrives at `now` needing `work` CPU seconds; returns what `take` would."""
        done = self.take(now)
        self._jobs.append([work, self._seq])
        self._items[self._seq] = item
        self._seq += 1
        return done

    def take(self, now: float) -> list[tuple[float, T]]:
        """Run the shared CPU up to `now`; the jobs finished by then, in finishing order."""
        out: list[tuple[float, T]] = []
        while self._jobs:
            n = len(self._jobs)
            least = min(float(j[0]) for j in self._jobs)
            finish = self._t + least * n
            if finish > now:
                share = (now - self._t) / n
                for job in self._jobs:
                    job[0] = float(job[0]) - share
                break
            finished = [job for job in self._jobs if job[0] == least]
            self._jobs = [job for job in self._jobs if job[0] != least]
            for job in self._jobs:
                job[0] = float(job[0]) - least
            self._t = finish
            out += [(finish, self._items.pop(int(job[1]))) for job in finished]
        self._t = max(self._t, now)
        return out

    def remove(self, item: T) -> bool:
        """Drop a job (its client went away); the others share the CPU without it."""
        for seq, held in self._items.items():
            if held is item:
                del self._items[seq]
                self._jobs = [job for job in self._jobs if job[1] != seq]
                return True
        return False
