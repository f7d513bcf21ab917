"""The waiting queue under `fcfs` and `priority` scheduling (docs/vllm-0.33-scheduler.md §1.6).

FCFS is a deque: arrivals go to the back, preempted requests and requests skipped by a scan go
back to the front in their original order. Priority is a heap on (priority, arrival_time,
request_id, ...), lower first; "putting back at the front" is a plain push there.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar


class Queued(Protocol):
    priority: int
    arrival: float
    rid: str
    index: int
    seq: int


R = TypeVar("R", bound=Queued)


class FcfsQueue(Generic[R]):
    def __init__(self) -> None:
        self._q: deque[R] = deque()

    def __len__(self) -> int:
        return len(self._q)

    def __iter__(self) -> Iterator[R]:
        return iter(self._q)

    def push(self, r: R) -> None:
        self._q.append(r)

    def push_front(self, r: R) -> None:
        self._q.appendleft(r)

    def restore_front(self, skipped: list[R]) -> None:
        self._q.extendleft(reversed(skipped))

    def peek(self) -> R:
        return self._q[0]

    def pop(self) -> R:
        return self._q.popleft()

    def remove(self, r: R) -> None:
        self._q.remove(r)


class PriorityQueue(Generic[R]):
    def __init__(self) -> None:
        self._heap: list[tuple[int, float, str, int, int, R]] = []

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self) -> Iterator[R]:
        return (item[-1] for item in self._heap)

    def push(self, r: R) -> None:
        # vLLM's Request.__lt__: priority, arrival_time, request_id; the choice index and the
        # engine sequence number stand in for the final id() tie-break
        heapq.heappush(self._heap, (r.priority, r.arrival, r.rid, r.index, r.seq, r))

    push_front = push

    def restore_front(self, skipped: list[R]) -> None:
        for r in skipped:
            self.push(r)

    def peek(self) -> R:
        return self._heap[0][-1]

    def pop(self) -> R:
        return heapq.heappop(self._heap)[-1]

    def remove(self, r: R) -> None:
        self._heap = [item for item in self._heap if item[-1] is not r]
        heapq.heapify(self._heap)
