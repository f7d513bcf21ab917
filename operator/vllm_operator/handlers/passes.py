"""Reconcile passes keyed by VLLMService, each kind on a thread pool of its own.

kopf runs every synchronous handler in one shared pool. A burst of creates then fills it with
passes that wait on the API server (a Service create waits for its ClusterIP), and the status
passes that a Deployment becoming available triggers queue behind them: Ready is written long
after the pods are. Here the kopf handlers only submit: spec passes and status passes run on
separate pools, and a service has at most one pass of a kind waiting (later submits replace
its argument), so a burst of Deployment events costs one pass, not one per event.

A service's passes of one kind also never run at once: two status passes, one with an older
Deployment than the other, would race for the per-service lock (handlers/reconcile.py), and
threading locks are not fair. When the older one won second, it wrote Ready back to False with
no event left to correct it (CI, stop 31: `kubectl wait --for=condition=Ready` timed out after
Ready had been True). So a key's passes run one after another on one worker, in submit order,
and the last one runs with the newest argument.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

log = logging.getLogger("vllm_operator.passes")

Later = Callable[[float, Callable[[], None]], None]


def retry_delay(failures: int, first: float = 1.0, cap: float = 60.0) -> float:
    """Back-off before retrying a pass that failed `failures` times in a row (pure)."""
    return float(min(cap, first * 2 ** max(0, failures - 1)))


class PassQueue:
    """At most one waiting and one running pass per key; a failed pass is retried with back-off.

    `run(key, arg)` is the pass; `arg` is what the submitter saw, None after a failure.
    `later(delay, fn)` schedules `fn` (the event loop's call_later in the operator); a retry is
    dropped when a newer submit for the key came in meanwhile (that pass retries itself).
    """

    def __init__(
        self, name: str, workers: int, run: Callable[[Any, Any], None], later: Later
    ) -> None:
        self.name, self.run, self.later = name, run, later
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self.guard = threading.Lock()
        self.waiting: dict[Hashable, Any] = {}  # key -> the argument of its waiting pass
        self.busy: set[Hashable] = set()  # keys a worker is draining
        self.failures: dict[Hashable, int] = {}
        self.submits: dict[Hashable, int] = {}  # per key, to tell a stale retry

    def submit(self, key: Hashable, arg: Any = None) -> None:
        with self.guard:
            self.submits[key] = self.submits.get(key, 0) + 1
            self.waiting[key] = arg
            idle = key not in self.busy
            self.busy.add(key)
        if idle:  # else the worker draining the key runs this pass after its current one
            self.pool.submit(self._drain, key)

    def _drain(self, key: Hashable) -> None:
        while True:
            with self.guard:
                if key not in self.waiting:
                    self.busy.discard(key)
                    return
                arg = self.waiting.pop(key)
                seq = self.submits[key]
            self._one(key, arg, seq)

    def _one(self, key: Hashable, arg: Any, seq: int) -> None:
        try:
            self.run(key, arg)
        except Exception:
            with self.guard:
                failures = self.failures[key] = self.failures.get(key, 0) + 1
            delay = retry_delay(failures)
            log.exception("%s pass of %s failed; retrying in %.0fs", self.name, key, delay)
            self.later(delay, lambda: self._retry(key, seq))
            return
        with self.guard:
            self.failures.pop(key, None)
            if key not in self.waiting and self.submits.get(key) == seq:
                del self.submits[key]  # nothing newer: forget the key (deleted objects)

    def _retry(self, key: Hashable, seq: int) -> None:
        with self.guard:
            # a newer submit bumped the count, or its pass succeeded and forgot the key
            stale = self.submits.get(key) != seq
        if not stale:
            self.submit(key, None)  # None: the pass reads the object again, not the old copy

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
