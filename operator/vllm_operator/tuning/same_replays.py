"""Replays' verdicts, answered again for configurations that replay the same.

A look for a budget move (tuning/retune_pods.py) replays each move of its grid once, at its bar,
and most of them change nothing the replay reaches: a valve of 512 or 2048 where the queue never
held 60, a token budget of 32768 where no step was held back at 8192. Each such replay is the
same, step for step, as one already made (sim/engine/reach.py says when), so its verdict is
that one's. Bounded (least recently used dropped) and shared by the pool threads that run
tuning passes, so guarded by a lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from vllm_operator.sim.engine.config import ResolvedConfig
from vllm_operator.sim.engine.reach import Reach

SIZE = 512  # replay settings (workload, SLO, GPU, replicas) kept


class SameReplays:
    """Verdicts by replay setting: for each, the configurations replayed and their reach."""

    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        self._by: OrderedDict[Hashable, list[tuple[ResolvedConfig, Reach, bool]]] = OrderedDict()
        self._lock = threading.Lock()

    def find(self, setting: Hashable, res: ResolvedConfig) -> bool | None:
        """The verdict of a replay under `setting` that `res` would make the same; None when
        there is none."""
        with self._lock:
            ran = self._by.get(setting)
            if ran is None:
                return None
            self._by.move_to_end(setting)
            return next((verdict for r, reach, verdict in ran if reach.same_run(r, res)), None)

    def add(self, setting: Hashable, res: ResolvedConfig, reach: Reach, verdict: bool) -> None:
        with self._lock:
            self._by.setdefault(setting, []).append((res, reach, verdict))
            self._by.move_to_end(setting)
            while len(self._by) > self.size:
                self._by.popitem(last=False)
