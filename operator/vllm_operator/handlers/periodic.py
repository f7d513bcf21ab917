"""Operator-wide periodic passes (drift resync, tuning) without per-object kopf timers.

kopf timers put a finalizer on every object, so a VLLMService could not be deleted while the
operator is down (or after it is uninstalled) and a namespace holding one would never finish
terminating. One loop per operator, listing the objects once per period, needs no finalizer and
makes one LIST instead of one timer task per object.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from vllm_operator import constants as c
from vllm_operator.handlers.deps import Deps
from vllm_operator.handlers.passes import PassQueue
from vllm_operator.k8s.client import namespace_scopes

log = logging.getLogger("vllm_operator.periodic")


def list_services(deps: Deps, namespaces: tuple[str, ...]) -> list[dict[str, Any]]:
    scopes = namespace_scopes(namespaces)
    return [obj for ns in scopes for obj in deps.kube.list(c.API_VERSION, c.KIND, ns)]


async def run_periodically(
    name: str,
    interval: float,
    deps: Deps,
    namespaces: tuple[str, ...],
    action: Callable[[dict[str, Any]], None],
    stop: asyncio.Event,
    active: Callable[[], bool] = lambda: True,
) -> None:
    """Every `interval`, call `action` for each live VLLMService, spread evenly over the period.

    `active` says whether this replica may write now (HA: it holds the lease); a standby keeps
    its rhythm but acts on nothing.
    """
    while not stop.is_set():
        if not active():
            await _sleep_or_stop(stop, min(interval, 5.0))
            continue
        started = asyncio.get_running_loop().time()
        try:
            bodies = await asyncio.to_thread(list_services, deps, namespaces)
        except Exception:  # the API may be briefly unreachable; try again next period
            log.exception("%s: listing VLLMServices failed", name)
            bodies = []
        live = [b for b in bodies if not b["metadata"].get("deletionTimestamp")]
        gap = interval / max(1, len(live))
        for body in live:
            if stop.is_set() or not active():
                break
            try:
                await asyncio.to_thread(action, body)
            except Exception:
                meta = body["metadata"]
                log.exception("%s of %s/%s failed", name, meta["namespace"], meta["name"])
            await _sleep_or_stop(stop, gap)
        elapsed = asyncio.get_running_loop().time() - started
        await _sleep_or_stop(stop, max(0.0, interval - elapsed))


def submit_to(queue: PassQueue) -> Callable[[dict[str, Any]], None]:
    """An action for `run_periodically` that hands each service to `queue`, keyed by namespace
    and name, instead of running it on the loop's turn.

    The loop takes the services one after another. Run in that turn, one slow pass (a cold
    engine-model evaluation, an API call waiting out its timeout) held back every service after
    it, for as long as it took. On the queue, passes of different services run side by side,
    and a service whose pass still runs has at most one more waiting (the newest body), so a
    slow service is never tuned twice at once.
    """

    def submit(body: dict[str, Any]) -> None:
        meta = body["metadata"]
        queue.submit((meta["namespace"], meta["name"]), body)

    return submit


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
