"""Load balancers in front of the replicas: which ready replica gets the next request."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Routable(Protocol):
    @property
    def id(self) -> int: ...

    @property
    def outstanding(self) -> int: ...


class Balancer(Protocol):
    def choose(self, ready: Sequence[Routable]) -> int:
        """Index into `ready` (non-empty, ordered by replica id)."""
        ...


class RoundRobin:
    """Cycles through the ready replicas (a Kubernetes Service with kube-proxy IPVS rr)."""

    def __init__(self) -> None:
        self._turn = 0

    def choose(self, ready: Sequence[Routable]) -> int:
        index = self._turn % len(ready)
        self._turn += 1
        return index


class LeastOutstanding:
    """Fewest requests accepted and not yet finished; ties go round robin, not to replica 0."""

    def __init__(self) -> None:
        self._turn = 0

    def choose(self, ready: Sequence[Routable]) -> int:
        count = len(ready)
        start = self._turn % count
        self._turn += 1
        best = start
        for step in range(1, count):
            index = (start + step) % count
            if ready[index].outstanding < ready[best].outstanding:
                best = index
        return best


BALANCERS: dict[str, type[RoundRobin] | type[LeastOutstanding]] = {
    "round_robin": RoundRobin,
    "least_outstanding": LeastOutstanding,
}


def make_balancer(name: str) -> Balancer:
    try:
        return BALANCERS[name]()
    except KeyError:
        raise ValueError(f"unknown balancer {name!r}; known: {', '.join(BALANCERS)}") from None
