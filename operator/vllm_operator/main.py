"""kopf wiring, and nothing else: registrations, start-up settings, probes.

Run with `vllm-operator run` (or `kopf run -m vllm_operator.main`). The kopf handlers are async
and only submit: the passes are synchronous (the kubernetes client is) and run on the
operator's own pools (handlers/passes.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kopf

from vllm_operator import constants as c
from vllm_operator.handlers.children import Seen
from vllm_operator.handlers.deployment_watch import (
    Changed,
    DeploymentWatch,
    start_deployment_watches,
)
from vllm_operator.handlers.deps import Deps, build_deps
from vllm_operator.handlers.leader import LeaseGate
from vllm_operator.handlers.passes import Later, PassQueue
from vllm_operator.handlers.periodic import run_periodically, submit_to
from vllm_operator.handlers.pod_watch import PodWatches
from vllm_operator.handlers.reconcile import reconcile_by_name, spec_unreconciled
from vllm_operator.handlers.tune import tune
from vllm_operator.k8s.client import KubeClient
from vllm_operator.observability import RECONCILE_SECONDS, configure_logging, serve_metrics
from vllm_operator.status.pods import ServiceKey

# A spec pass waits for its Service, and the Service for its turn among SERVICE_APPLIES: more
# spec workers than that start the next services' Deployments meanwhile, whose pods then start
# before their Service is in. Status passes are short. Measured: docs/operator-scale.md.
SPEC_WORKERS = 24
STATUS_WORKERS = 8
TUNE_WORKERS = 4  # tuning passes side by side (handlers/periodic.py submit_to)
# A spec pass hands its Deployment and all its other children but one to this pool
CHILD_WORKERS = 2 * SPEC_WORKERS
# Service creates queue in the API server: 8 in flight went through as fast as 16 (13-14/s
# while 300 services start), each in half the time, and the API server spent 2.6 CPU-s less
SERVICE_APPLIES = 8


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Only event handlers are registered: kopf keeps no diffbase or progress annotation on
    # VLLMServices (no patch per create) and adds no finalizer. These name its storage should
    # a changing handler ever come back.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=c.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=c.GROUP, key="last-handled-configuration"
    )
    settings.persistence.finalizer = f"{c.GROUP}/finalizer"
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 60
    deps = memo.deps = build_deps(os.environ)
    configure_logging(deps.cfg.log_level)
    if deps.cfg.metrics_port is not None:
        serve_metrics(deps.cfg.metrics_port, deps.cfg.metrics_address)
    start_passes(memo, deps)
    start_periodic(memo, deps)
    start_watches(memo, deps)


def later_on_this_loop() -> Later:
    """A PassQueue's `later`: call `fn` after `delay` seconds on the running event loop, from
    any thread (a pass's retry is scheduled from its worker)."""
    loop = asyncio.get_running_loop()

    def later(delay: float, fn: Any) -> None:
        loop.call_soon_threadsafe(loop.call_later, delay, fn)

    return later


def start_passes(memo: kopf.Memo, deps: Deps) -> None:
    """The pools the handlers submit to: spec passes (they apply children and wait on the API
    server) and status passes (Deployment and pod events), so that neither waits for the other.
    """
    log = logging.getLogger("vllm_operator")
    later = later_on_this_loop()

    def spec_pass(key: tuple[str, str], body: dict[str, Any] | None) -> None:
        started = time.monotonic()
        reconcile_by_name(*key, deps=deps, logger=log, body=body)
        RECONCILE_SECONDS.labels("reconcile").observe(time.monotonic() - started)

    def status_pass(key: tuple[str, str], seen: Seen | None) -> None:
        started = time.monotonic()
        reconcile_by_name(*key, deps=deps, logger=log, seen=seen or Seen())
        RECONCILE_SECONDS.labels("status").observe(time.monotonic() - started)

    deps.children = ThreadPoolExecutor(max_workers=CHILD_WORKERS, thread_name_prefix="children")
    deps.service_applies = ThreadPoolExecutor(SERVICE_APPLIES, thread_name_prefix="services")
    # one thread: a service's Events go out in the order of its transitions
    deps.events = ThreadPoolExecutor(max_workers=1, thread_name_prefix="events")
    memo.known = set()  # VLLMServices this process has seen (their start-up pass is done)
    memo.spec_passes = PassQueue("spec", SPEC_WORKERS, spec_pass, later)
    memo.status_passes = PassQueue("status", STATUS_WORKERS, status_pass, later)


def start_periodic(memo: kopf.Memo, deps: Deps) -> None:
    """Drift resync and tuning passes, from operator-wide loops (no per-object finalizers).

    With kopf peering (HA) only the replica holding the Lease runs them.
    """
    log = logging.getLogger("vllm_operator")
    memo.stop_periodic = asyncio.Event()
    namespaces: tuple[str, ...] = tuple(getattr(memo, "namespaces", ()))  # set by `run -n`
    tasks = []
    gate: LeaseGate | None = None
    if getattr(memo, "peering", None):
        gate = LeaseGate(
            deps.kube,
            namespace=os.environ.get("POD_NAMESPACE")
            or (namespaces[0] if namespaces else "default"),
            name=f"{memo.peering}-loops",
            identity=os.environ.get("POD_ID") or f"{socket.gethostname()}-{os.getpid()}",
        )
        tasks.append(asyncio.create_task(gate.keep(memo.stop_periodic, deps.clock)))

    def active() -> bool:
        return gate is None or gate.held

    memo.active = active
    memo.gate = gate

    def resync(body: dict[str, Any]) -> None:
        started = time.monotonic()
        # The listed copy is up to a period old: a spec edited since would be rendered back into
        # the children. Pass it under the service's lock on the newest copy, the listed one or
        # what the watch and the status writes left since, as the status passes do
        # (handlers/cached_parent.py).
        meta = body["metadata"]
        reconcile_by_name(meta["namespace"], meta["name"], deps=deps, logger=log, listed=body)
        RECONCILE_SECONDS.labels("resync").observe(time.monotonic() - started)

    def tune_one(key: tuple[str, str], body: dict[str, Any]) -> None:
        started = time.monotonic()
        try:
            tune(body, deps=deps, logger=log)
        except Exception:  # not retried: the next period tunes the service from a fresh list
            log.exception("tune of %s/%s failed", *key)
        RECONCILE_SECONDS.labels("tune").observe(time.monotonic() - started)

    memo.tune_passes = PassQueue("tune", TUNE_WORKERS, tune_one, later_on_this_loop())
    loops = [
        ("resync", deps.cfg.resync_seconds, resync),
        ("tune", deps.cfg.tuning_interval_seconds, submit_to(memo.tune_passes)),
    ]
    for name, every, fn in loops:
        loop = run_periodically(name, every, deps, namespaces, fn, memo.stop_periodic, active)
        tasks.append(asyncio.create_task(loop))
    memo.periodic = tasks


def start_watches(memo: kopf.Memo, deps: Deps) -> None:
    """The pods and the Deployments, from the operator's own watches (handlers/pod_watch.py,
    handlers/deployment_watch.py), not kopf's; what their news passes: `status_submitters`."""
    memo.stop_pods = threading.Event()
    namespaces: tuple[str, ...] = tuple(getattr(memo, "namespaces", ()))
    if not isinstance(deps.kube, KubeClient):  # build_deps makes one; nothing else runs this
        raise TypeError("the watches need k8s/client.py's KubeClient")
    stuck, deployment_changed = status_submitters(memo)
    memo.pods = PodWatches(deps.kube, namespaces, stuck, memo.stop_pods)
    deps.pods_of = memo.pods.pods_of
    memo.pods.start()
    watches = start_deployment_watches(deps.kube, namespaces, deployment_changed, memo.stop_pods)
    if memo.gate is not None:  # HA: a replica that starts holding the Lease catches up
        memo.gate.on_hold = lambda: pass_all(watches, deployment_changed)


def pass_all(watches: list[DeploymentWatch], changed: Changed) -> None:
    """A status pass for every service with a Deployment the watches know: what a replica that
    stood by (HA) passed nothing for. The spec passes follow kopf's peering, which may hand the
    services over before the Lease is free (LeaseGate.duration), and the Deployment events
    that came meanwhile were dropped."""
    for watch in watches:
        for key, deployment in watch.newest():
            changed(key, deployment)


def status_submitters(memo: Any) -> tuple[Callable[[ServiceKey], None], Changed]:
    """What the watches call: a pod of the service just became stuck, and its Deployment changed.

    A Deployment that changed (rollout progress, an edit) gets its service a status pass at
    once, with the Deployment from the event, the scheduling state from the pod watch and the
    parent the newest copy at hand (handlers/cached_parent.py), so the pass usually reads
    nothing; the other children wait for the resync timer, and events that come while the
    service's pass waits are folded into it (the newest Deployment wins). A pod that has just
    become stuck (no node fits it, its server crash-loops) gets one too, so Degraded says so
    when the Deployment does not change. A standby replica (HA) keeps its tables but passes
    nothing.
    """

    def pass_status(key: ServiceKey, children: dict[str, dict[str, Any]]) -> None:
        if memo.active():
            seen = Seen(children, pods=memo.pods.pods_of(key), only=frozenset({"Deployment"}))
            memo.status_passes.submit(key, seen)

    def stuck(key: ServiceKey) -> None:
        pass_status(key, {})

    def deployment_changed(key: ServiceKey, deployment: dict[str, Any] | None) -> None:
        memo.deps.deployments.note(deployment)  # a pass under way reports it (reconcile.py)
        pass_status(key, {} if deployment is None else {"Deployment": deployment})

    return stuck, deployment_changed


@kopf.on.cleanup()
async def stop_periodic(memo: kopf.Memo, **_: Any) -> None:
    memo.stop_periodic.set()
    memo.stop_pods.set()
    await asyncio.gather(*memo.periodic, return_exceptions=True)
    memo.spec_passes.shutdown()
    memo.status_passes.shutdown()
    memo.tune_passes.shutdown()
    memo.deps.children.shutdown(wait=False, cancel_futures=True)
    memo.deps.service_applies.shutdown(wait=False, cancel_futures=True)
    memo.deps.events.shutdown(wait=False)  # the Events already submitted still go out


@kopf.on.event(c.GROUP, c.VERSION, c.PLURAL, id="vllmservice.reconcile")
async def on_vllmservice(body: kopf.Body, type: str | None, memo: kopf.Memo, **_: Any) -> None:
    """Level-based: a spec not yet reconciled, or an object first seen by this process (as
    kopf's resume handler did at start-up), gets a pass.

    kopf's create/update handlers would keep a diffbase annotation on every VLLMService (one
    more patch per create); the generation the status last reported says the same. A failed
    pass is retried by the queue with back-off, as kopf would. A re-listing (a watch restarted
    after 410 Gone) does not repeat the start-up passes; the resync loop checks drift.
    """
    meta = body.metadata
    key = (meta.namespace or "", meta.name or "")
    if type == "DELETED":
        memo.known.discard(key)
        memo.deps.deployments.forget(*key)  # its Deployment has the service's name
        memo.deps.services.forget(*key)
        memo.deps.renders.forget(*key)
        return
    memo.deps.services.note(dict(body))
    if meta.get("deletionTimestamp") or not meta.namespace:
        return
    first = key not in memo.known
    memo.known.add(key)
    if first or spec_unreconciled(dict(body)):
        memo.spec_passes.submit(key, dict(body))


@kopf.on.probe(id="reconciling")
def probe_alive(**_: Any) -> bool:
    return True
