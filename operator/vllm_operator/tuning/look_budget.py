"""How much CPU the operator spends on rule 9b's looks per minute, over all its services.

A look for a budget move (tuning/retune_pods.py) replays the engine model a few dozen times:
about 0.5 CPU-s a look on average and up to about 4 for some services
(bench/results/capacity_pass.md), where the rest of a tuning pass costs a third of a
millisecond. Every service in Auto or Recommend is due for one each `fewer_pods_recheck` (10
minutes), so 1,000 of them would make 100 looks a minute: about a minute of CPU in every
minute, on the cores the operator's watches and passes share. The budget bounds it: a bucket of
`cpu_per_minute` CPU-seconds, refilled at that rate. A pass whose service is due for a look
may make it when the bucket holds what the last look cost (at most a minute's CPU), and the
pass's CPU time is then taken from it; a look dearer than the last overdraws the bucket by the
difference, which the refill repays before the next. Otherwise the pass decides without the
look, and the service stays due and tries again at its next pass. At the default (2 CPU-s a
minute, a thirtieth of a core: about four average looks) some 40 services are looked at every
10 minutes; more are each looked at less often. The look is how the tuner finds budgets far
from the model's best while the SLO holds; the problem rules (1b, 8c) and the replica lever
are not budgeted.

The operator holds one LookBudget (handlers/deps.py), shared by the pool threads that run
tuning passes, so it is guarded by a lock; what decides stays pure (tuning/decide.py asks for a
look through a callable, and `metered` times the pass on its own thread).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from vllm_operator.config import OperatorConfig

T = TypeVar("T")


class LookBudget:
    """A bucket of CPU-seconds for looks: `cpu_per_minute` at most, refilled at that rate a
    `minute` (seconds; shorter where the tuner's time is scaled, as in the e2e tier)."""

    def __init__(self, cpu_per_minute: float, minute: float = 60.0) -> None:
        if cpu_per_minute <= 0 or minute <= 0:
            raise ValueError("a look budget needs a positive rate and period")
        self.cpu_per_minute = cpu_per_minute
        self.minute = minute
        self._left = cpu_per_minute
        self._last = 0.0  # what the last look cost: the next starts when the bucket holds it
        self._at: datetime | None = None
        self._lock = threading.Lock()

    def take(self, now: datetime) -> bool:
        """Whether a look may start at `now`: the bucket, refilled to `now`, holds what the
        last look cost (a minute's CPU at most), and some."""
        with self._lock:
            if self._at is not None and now > self._at:
                refill = (now - self._at).total_seconds() / self.minute * self.cpu_per_minute
                self._left = min(self.cpu_per_minute, self._left + refill)
            self._at = now if self._at is None else max(self._at, now)
            return self._left > 0 and self._left >= min(self._last, self.cpu_per_minute)

    def charge(self, cpu_seconds: float) -> None:
        """What a look cost, taken from the bucket (below zero when it overdrew)."""
        with self._lock:
            self._last = max(0.0, cpu_seconds)
            self._left -= self._last

    def metered(self, now: datetime, run: Callable[[Callable[[], bool]], T]) -> T:
        """`run(may_look)`, where `may_look()` says whether a look may start; when it said yes,
        the run's CPU time on this thread is charged."""
        looked = False

        def may_look() -> bool:
            nonlocal looked
            looked = self.take(now)
            return looked

        start = time.thread_time()
        try:
            return run(may_look)
        finally:
            if looked:
                self.charge(time.thread_time() - start)


def look_budget_of(cfg: OperatorConfig) -> LookBudget:
    """The operator's budget: cfg.tuning_look_cpu_per_minute, a minute scaled as the tuner's
    windows are (cfg.tuning_time_scale)."""
    return LookBudget(cfg.tuning_look_cpu_per_minute, 60.0 * cfg.tuning_time_scale)
