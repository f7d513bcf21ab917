"""Waiting on conditions, never on the clock alone.

`wait_until` re-evaluates a probe until it returns something truthy or the deadline passes, and
then fails with the last thing it saw, so a timeout explains itself. `watch_until` does the same on
a Kubernetes watch stream, which wakes on each change instead of polling.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes import watch

T = TypeVar("T")


def wait_until(probe: Callable[[], T], *, timeout: float, what: str, interval: float = 0.2) -> T:
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = probe()
        except Exception as exc:  # a probe may race object creation; keep the error for the report
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}"
            )
        time.sleep(interval)


def watch_until(
    list_fn: Callable[..., Any],
    predicate: Callable[[Any], bool],
    *,
    timeout: float,
    what: str,
    **list_kwargs: Any,
) -> Any:
    """Stream watch events from `list_fn` until an object satisfies `predicate`; return it."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while (remaining := deadline - time.monotonic()) > 0:
        initial = list_fn(**list_kwargs)
        for obj in initial.items:
            last = obj
            if predicate(obj):
                return obj
        w = watch.Watch()
        for event in w.stream(
            list_fn,
            resource_version=initial.metadata.resource_version,
            timeout_seconds=max(1, int(remaining)),
            **list_kwargs,
        ):
            last = event["object"]
            if event["type"] in ("ADDED", "MODIFIED") and predicate(last):
                w.stop()
                return last
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")
