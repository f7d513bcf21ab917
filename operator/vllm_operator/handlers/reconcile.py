"""One level-based reconcile for a VLLMService: render, apply what drifted, report status.

I/O happens only at the edges (reads first, then writes); every decision in between is a pure
function of what was read. The same function serves create, update, resume, the resync timer and
events on the children, so there is a single path to reason about.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from vllm_operator import constants as c
from vllm_operator.api.errors import format_validation_error
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.handlers.cached_parent import ChildWriteOnCopyError, StatusWritesOnly
from vllm_operator.handlers.canary import sync_canary
from vllm_operator.handlers.children import Seen, api_reason, apply_children, prune_children
from vllm_operator.handlers.deps import Deps
from vllm_operator.handlers.status_write import apply_status, retry_on_stale_read
from vllm_operator.render import PolicyError, RenderError, UnknownGPUTypeError
from vllm_operator.render.overrides import overrides_from_status
from vllm_operator.status.gpu import bound_nodes, summarize_gpu
from vllm_operator.status.pods import crash_looping, selector_for, unschedulable
from vllm_operator.status.summarize import (
    Observed,
    newsworthy,
    read_rollout,
    status_changed,
    summarize_status,
)

NOTHING_SEEN = Seen()  # frozen: one default for every pass that observed nothing beforehand


class _ObjectLock:
    __slots__ = ("__weakref__", "lock")

    def __init__(self) -> None:
        self.lock = threading.RLock()


_locks: weakref.WeakValueDictionary[tuple[str, str], _ObjectLock] = weakref.WeakValueDictionary()
_locks_guard = threading.Lock()


@contextmanager
def one_pass_at_a_time(namespace: str, name: str) -> Iterator[None]:
    """Serialise the passes of one VLLMService across kopf's handler threads and the loops.

    A create pass and the passes of the Deployment's events run at once on kwok-fast rollouts;
    without this, a pass that read the Deployment early could write its status after a pass that
    read it later, and Ready would go back to False with no event left to correct it. A lock
    lives while some pass holds or waits for it (weak values), so deleted objects leave nothing.
    """
    with _locks_guard:
        holder = _locks.get((namespace, name))
        if holder is None:
            holder = _locks[(namespace, name)] = _ObjectLock()
    with holder.lock:
        yield


def unschedulable_message(pods: list[dict[str, Any]]) -> str | None:
    """The scheduler's verdict on Pending pods, as one sentence (None: every pod placed)."""
    stuck = [message for message in map(unschedulable, pods) if message is not None]
    if not stuck:
        return None
    return f"{len(stuck)}/{len(pods)} pods cannot be scheduled: {stuck[0]}"


def crash_loop_message(pods: list[dict[str, Any]]) -> str | None:
    """The kubelet's back-off on containers that keep exiting, as one sentence (None: none)."""
    looping = [cs for pod in pods for cs in crash_looping(pod)]
    if not looping:
        return None
    first = looping[0]
    last = (first.get("lastState", {}).get("terminated") or {}).get("exitCode")
    exit_ = "" if last is None else f", last exit code {last}"
    return (
        f"{len(looping)}/{len(pods)} pods crash-looping: container {first.get('name')} restarted"
        f" {first.get('restartCount', 0)} times{exit_}"
    )


def reconcile(
    body: dict[str, Any], *, deps: Deps, logger: logging.Logger | Any, seen: Seen = NOTHING_SEEN
) -> None:
    meta = body["metadata"]

    # again: the service changed since `body` was read; an event's Deployment may be as old
    def attempt(read: dict[str, Any], again: bool) -> None:
        _reconcile(read, deps=deps, logger=logger, seen=Seen(only=seen.only) if again else seen)

    with one_pass_at_a_time(meta["namespace"], meta["name"]):
        retry_on_stale_read(deps.kube, body, attempt)


def _reconcile(
    body: dict[str, Any], *, deps: Deps, logger: logging.Logger | Any, seen: Seen
) -> None:
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    previous: dict[str, Any] = dict(body.get("status") or {})
    now = deps.clock()
    delivered = seen.children.get("Deployment")
    newest = deps.deployments.newest_of(delivered)
    if newest is not None and newest is not delivered:
        # an event delivered after a newer copy was noted (k8s/versions.py): use that one
        seen = Seen({**seen.children, "Deployment": newest}, pods=seen.pods, only=seen.only)

    effective = None
    problem: tuple[str, str] | None = None
    gpu: dict[str, Any] | None = None
    try:
        svc = VLLMService.model_validate(body)
        rendered = deps.renders.render(svc, deps.cfg, overrides_from_status(svc))
        manifests, effective = rendered.manifests, rendered.effective_status()
    except ValidationError as exc:
        # The API server's schema should have refused this; it can still happen for objects
        # stored before a CRD upgrade. Nothing is applied from a spec we cannot trust.
        problem = (c.REASON_INVALID_SPEC, "; ".join(format_validation_error(exc)))
    except PolicyError as exc:
        problem = (c.REASON_POLICY_DENIED, str(exc))
    except UnknownGPUTypeError as exc:
        problem = (c.REASON_UNKNOWN_GPU, str(exc))
        gpu = {"unknown": True}
    except RenderError as exc:
        # e.g. budgets vLLM would refuse on this GPU: nothing is applied, pods keep running
        problem = (c.REASON_INVALID_SPEC, str(exc))
    if problem is not None:
        # the pods of the last good spec may still run: status counts them
        stored = _stored_deployment(deps, namespace, name, seen)
        observed = Observed(stored, problem=problem, gpu=gpu)
    else:
        try:
            deployment = apply_children(deps, svc, manifests, seen, logger, fresh=not previous)
        except ApiException as exc:
            # The API refused a child (quota, an exhausted Service IP range, a webhook): say so
            # in status, then fail the pass: handlers/passes.py retries it with back-off.
            stored = _stored_deployment(deps, namespace, name, seen)
            failed = Observed(stored, problem=(c.REASON_APPLY_FAILED, api_reason(exc)))
            _write_status(deps, body, previous, failed, effective, now, logger)
            raise
        if previous and seen.only is None:
            prune_children(deps, svc, manifests, logger)
            sync_canary(deps, svc, logger)
        # Its pods may have become ready while the pass waited for the other children (the
        # Service's create queues in the API server): report the newest Deployment the watch
        # has seen, so that one status write says Ready instead of two (not ready, then ready)
        deployment = deps.deployments.newest_of(deployment)
        rollout = read_rollout(deployment or {})
        ready = deployment is not None and rollout.ready >= rollout.desired
        # a spec pass has no pods from an event: the pod watch's table has them (pod_watch.py)
        pods = seen.pods if seen.pods is not None else deps.pods_of((namespace, name))
        fallbacks = bool(svc.spec.gpu.fallback_types)  # only then do the nodes say the type
        wanted = fallbacks or not ready
        if pods is None and wanted and rollout.current > 0:  # a new Deployment has no pods
            pods = deps.kube.list("v1", "Pod", namespace, selector_for(name))
        unschedulable = None if ready else unschedulable_message(pods or [])
        crash_loop = None if ready else crash_loop_message(pods or [])
        labels = _read_node_labels(deps, pods or [], logger) if fallbacks else None
        gpu = summarize_gpu(svc.spec.gpu, deps.cfg.gpu_catalog, labels)
        observed = Observed(
            deployment, unschedulable_message=unschedulable, crash_loop_message=crash_loop, gpu=gpu
        )

    deps.deployments.note(observed.deployment)
    _write_status(deps, body, previous, observed, effective, now, logger)
    if problem is None:
        _post_warnings(deps, body, previous, rendered.warnings, now, logger)


def _stored_deployment(deps: Deps, namespace: str, name: str, seen: Seen) -> dict[str, Any] | None:
    """The Deployment as stored, for status on a pass that applies nothing; None if unreadable."""
    if "Deployment" in seen.children:
        return seen.children["Deployment"]
    try:
        return deps.kube.get("apps/v1", "Deployment", namespace, name)
    except ApiException:  # the pass reports its own problem; counts are best effort
        return None


def _read_node_labels(
    deps: Deps, pods: list[dict[str, Any]], logger: logging.Logger | Any
) -> list[dict[str, str]] | None:
    """Labels of the nodes the pods are bound to; None when a node cannot be read (RBAC)."""
    labels = []
    for node_name in bound_nodes(pods):
        try:
            node = deps.kube.get("v1", "Node", "", node_name)
        except ApiException as exc:  # status.gpu then has no resolvedType; the pass goes on
            logger.warning("cannot read node %s for status.gpu: %s", node_name, exc.reason)
            return None
        if node is not None:
            labels.append(dict(node["metadata"].get("labels") or {}))
    return labels


def _write_status(
    deps: Deps,
    body: dict[str, Any],
    previous: dict[str, Any],
    observed: Observed,
    effective: dict[str, Any] | None,
    now: datetime,
    logger: logging.Logger | Any,
) -> None:
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    generation = int(meta.get("generation", 1))
    status = summarize_status(
        generation=generation,
        previous=previous,
        observed=observed,
        effective=effective,
        selector=selector_for(name),
        now=now,
    )
    if not status_changed(previous, status):
        return
    meta_out = {"name": name, "namespace": namespace}
    patch = {"apiVersion": c.API_VERSION, "kind": c.KIND, "metadata": meta_out, "status": status}
    deps.services.note(apply_status(deps.kube, body, patch, field_manager=c.FM_STATUS))
    for cond in newsworthy(previous.get("conditions") or [], status["conditions"]):
        bad = (cond["type"] == c.COND_READY) != (cond["status"] == "True")
        kind = "Warning" if bad else "Normal"
        deps.events.submit(
            _post_event, deps, body, kind, cond["reason"], cond["message"], now, logger
        )
        logger.info(
            "%s/%s %s=%s: %s", namespace, name, cond["type"], cond["status"], cond["message"]
        )


def _post_warnings(
    deps: Deps,
    body: dict[str, Any],
    previous: dict[str, Any],
    warnings: list[str],
    now: datetime,
    logger: logging.Logger | Any,
) -> None:
    """The renderer's warnings (legal but probably unintended settings: render/core.py
    compute_warnings), as Warning Events, by the pass that first reports a generation: `kubectl
    describe` and a GitOps tool's event view show what `vllm-operator render` prints."""
    generation = int(body["metadata"].get("generation", 1))
    if previous.get("observedGeneration") == generation:
        return
    for warning in warnings:
        deps.events.submit(
            _post_event, deps, body, "Warning", c.REASON_SPEC_WARNING, warning, now, logger
        )


def _post_event(
    deps: Deps,
    body: dict[str, Any],
    kind: str,
    reason: str,
    message: str,
    now: datetime,
    logger: logging.Logger | Any,
) -> None:
    """One Event. Off the pass: status, written already, is the state; a lost Event is logged,
    not retried (what it tells of is over, or in status)."""
    try:
        deps.kube.emit_event(body, type=kind, reason=reason, message=message, now=now)
    except Exception as exc:  # an API refusal or a dropped connection alike
        meta = body["metadata"]
        logger.warning(
            "cannot post the %s Event of %s/%s: %s", reason, meta["namespace"], meta["name"], exc
        )


def reconcile_by_name(
    namespace: str,
    name: str,
    *,
    deps: Deps,
    logger: logging.Logger | Any,
    body: dict[str, Any] | None = None,
    seen: Seen = NOTHING_SEEN,
    listed: dict[str, Any] | None = None,
) -> None:
    """Reconcile the VLLMService that owns a child that changed (it may be gone already).

    Without `body`, the pass runs on the newest copy the process has of the service, if any,
    and reads it from the API server only when that pass would write a child
    (handlers/cached_parent.py). `listed`: a copy the caller read (the resync's LIST), which
    replaces the one kept if it is newer: a watch that stalls, or a standby's that kopf paused
    until it took over, then leaves copies at most one resync period old.
    """
    if listed is not None:
        deps.services.note(listed)
    with one_pass_at_a_time(namespace, name):  # read the parent after the pass before wrote it
        if body is None:
            copy = deps.services.copy_of(namespace, name)
            if copy is not None and _settled_on_copy(copy, deps, logger, seen):
                return
            body = deps.kube.get(c.API_VERSION, c.KIND, namespace, name)
        if body is not None and not body["metadata"].get("deletionTimestamp"):
            reconcile(body, deps=deps, logger=logger, seen=seen)


def _settled_on_copy(
    copy: dict[str, Any], deps: Deps, logger: logging.Logger | Any, seen: Seen
) -> bool:
    """Pass on `copy` with status writes only; False when the pass needs a fresh read."""
    if copy["metadata"].get("deletionTimestamp"):
        return True
    try:
        reconcile(copy, deps=replace(deps, kube=StatusWritesOnly(deps.kube)), logger=logger,
                  seen=seen)  # fmt: skip
    except ChildWriteOnCopyError:
        return False
    return True


def spec_unreconciled(body: dict[str, Any]) -> bool:
    """No pass has reported on this generation of the spec yet (pure)."""
    status = body.get("status") or {}
    return bool(status.get("observedGeneration") != body["metadata"].get("generation"))
