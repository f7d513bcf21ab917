"""kopf wiring, and nothing else: registrations, start-up settings, probes.

Run with `vllm-operator run` (or `kopf run -m vllm_operator.main`). Handlers are synchronous,
because the kubernetes client is; kopf runs them in its thread pool.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import Any

import kopf

from vllm_operator import constants as c
from vllm_operator.handlers.deps import Deps, build_deps
from vllm_operator.handlers.leader import LeaseGate
from vllm_operator.handlers.periodic import run_periodically
from vllm_operator.handlers.reconcile import Seen, reconcile, reconcile_by_name
from vllm_operator.handlers.tune import tune
from vllm_operator.observability import RECONCILE_SECONDS, serve_metrics


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=c.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=c.GROUP, key="last-handled-configuration"
    )
    settings.persistence.finalizer = f"{c.GROUP}/finalizer"
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 60
    # Sync handlers block a thread each on API round-trips; 1,000 services need more than 5.
    settings.execution.max_workers = 32
    deps = memo.deps = build_deps(os.environ)
    if deps.cfg.metrics_port is not None:
        serve_metrics(deps.cfg.metrics_port, deps.cfg.metrics_address)
    start_periodic(memo, deps)


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

    def resync(body: dict[str, Any]) -> None:
        reconcile(body, deps=deps, logger=log)

    def tune_one(body: dict[str, Any]) -> None:
        started = time.monotonic()
        tune(body, deps=deps, logger=log)
        RECONCILE_SECONDS.labels("tune").observe(time.monotonic() - started)

    loops = [
        ("resync", deps.cfg.resync_seconds, resync),
        ("tune", deps.cfg.tuning_interval_seconds, tune_one),
    ]
    for name, every, fn in loops:
        loop = run_periodically(name, every, deps, namespaces, fn, memo.stop_periodic, active)
        tasks.append(asyncio.create_task(loop))
    memo.periodic = tasks


@kopf.on.cleanup()
async def stop_periodic(memo: kopf.Memo, **_: Any) -> None:
    memo.stop_periodic.set()
    await asyncio.gather(*memo.periodic, return_exceptions=True)


@kopf.on.resume(c.GROUP, c.VERSION, c.PLURAL, id="vllmservice.reconcile")
@kopf.on.create(c.GROUP, c.VERSION, c.PLURAL, id="vllmservice.reconcile")
@kopf.on.update(c.GROUP, c.VERSION, c.PLURAL, field="spec", id="vllmservice.reconcile")
def on_vllmservice(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    reconcile(dict(body), deps=memo.deps, logger=logger)


@kopf.index("v1", "pods", labels={c.LABEL_MANAGED_BY: c.MANAGED_BY})
def vllm_pods(namespace: str | None, labels: kopf.Labels, status: kopf.Status, **_: Any) -> Any:
    """Pods by (namespace, VLLMService), with just what status needs: scheduling conditions."""
    parent = labels.get(c.LABEL_SERVICE)
    if not parent:
        return None
    return {(namespace, parent): {"status": {"conditions": list(status.get("conditions") or [])}}}


def _pods_of(index: kopf.Index[Any, Any], namespace: str, parent: str) -> list[dict[str, Any]]:
    return list(index.get((namespace, parent), []))


@kopf.on.event("apps", "v1", "deployments", labels={c.LABEL_MANAGED_BY: c.MANAGED_BY})
def on_child_deployment(
    body: kopf.Body, type: str, memo: kopf.Memo, logger: kopf.Logger, **kwargs: Any
) -> None:
    """A Deployment changed (rollout progress, an edit): status and drift follow at once.

    The event carries the Deployment and the pod index the scheduling state, so the pass reads
    only the parent; the other children wait for the resync timer.
    """
    parent = body.metadata.labels.get(c.LABEL_SERVICE)
    namespace = body.metadata.namespace
    if not parent or not namespace:
        return
    seen = Seen(
        children={} if type == "DELETED" else {"Deployment": dict(body)},
        pods=_pods_of(kwargs["vllm_pods"], namespace, parent),
        only=frozenset({"Deployment"}),
    )
    reconcile_by_name(namespace, parent, deps=memo.deps, logger=logger, seen=seen)


def _unschedulable(status: kopf.Status, **_: Any) -> bool:
    return any(x.get("reason") == "Unschedulable" for x in status.get("conditions") or [])


@kopf.on.event("v1", "pods", labels={c.LABEL_MANAGED_BY: c.MANAGED_BY}, when=_unschedulable)
def on_unschedulable_pod(
    namespace: str | None, labels: kopf.Labels, memo: kopf.Memo, logger: kopf.Logger, **kwargs: Any
) -> None:
    """No node fits a pod: the Deployment does not change, so this is how Degraded learns it."""
    parent = labels.get(c.LABEL_SERVICE)
    if parent and namespace:
        pods = _pods_of(kwargs["vllm_pods"], namespace, parent)
        seen = Seen(pods=pods, only=frozenset({"Deployment"}))
        reconcile_by_name(namespace, parent, deps=memo.deps, logger=logger, seen=seen)


@kopf.on.probe(id="reconciling")
def probe_alive(**_: Any) -> bool:
    return True
