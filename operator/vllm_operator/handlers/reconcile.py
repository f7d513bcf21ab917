"""One level-based reconcile for a VLLMService: render, apply what drifted, report status.

I/O happens only at the edges (reads first, then writes); every decision in between is a pure
function of what was read. The same function serves create, update, resume, the resync timer and
events on the children, so there is a single path to reason about.
"""

from __future__ import annotations

import json
import logging
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from vllm_operator import constants as c
from vllm_operator.api.errors import format_validation_error
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.handlers.canary import sync_canary
from vllm_operator.handlers.deps import Deps
from vllm_operator.handlers.rollout import choose_strategy
from vllm_operator.handlers.status_write import apply_status, retry_on_stale_read
from vllm_operator.render import PolicyError, RenderError, UnknownGPUTypeError, render_all
from vllm_operator.render.drift import is_applied, stamp_applied_hash
from vllm_operator.render.overrides import overrides_from_status
from vllm_operator.status.gpu import bound_nodes, summarize_gpu
from vllm_operator.status.summarize import (
    Observed,
    newsworthy,
    read_rollout,
    status_changed,
    summarize_status,
)
from vllm_operator.tuning.replicas import (
    build_replicas_patch,
    initial_replicas,
    tuner_owns_replicas,
)


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


def selector_for(name: str) -> str:
    return f"{c.LABEL_SERVICE}={name}"


def unschedulable_message(pods: list[dict[str, Any]]) -> str | None:
    """The scheduler's verdict on Pending pods, as one sentence (None: every pod placed)."""
    stuck = [
        str(cond.get("message", ""))
        for pod in pods
        for cond in pod.get("status", {}).get("conditions") or []
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable"
    ]
    if not stuck:
        return None
    return f"{len(stuck)}/{len(pods)} pods cannot be scheduled: {stuck[0]}"


def crash_loop_message(pods: list[dict[str, Any]]) -> str | None:
    """The kubelet's back-off on containers that keep exiting, as one sentence (None: none)."""
    looping = [
        cs
        for pod in pods
        for cs in pod.get("status", {}).get("containerStatuses") or []
        if (cs.get("state", {}).get("waiting") or {}).get("reason") == c.REASON_CRASH_LOOP
    ]
    if not looping:
        return None
    first = looping[0]
    last = (first.get("lastState", {}).get("terminated") or {}).get("exitCode")
    exit_ = "" if last is None else f", last exit code {last}"
    return (
        f"{len(looping)}/{len(pods)} pods crash-looping: container {first.get('name')} restarted"
        f" {first.get('restartCount', 0)} times{exit_}"
    )


@dataclass(frozen=True)
class Seen:
    """What the caller already observed (a watch event, a kopf index): no need to GET it again.

    `only` limits the pass to these child kinds; an event on the Deployment needs neither the
    Service nor the monitors read back, and the resync timer still checks every child.
    """

    children: dict[str, dict[str, Any]] = field(default_factory=dict)  # kind -> object
    pods: list[dict[str, Any]] | None = None
    only: frozenset[str] | None = None


# Children the spec may switch off; the Deployment and the Service always exist.
OPTIONAL_CHILDREN: tuple[tuple[str, str], ...] = (
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PodMonitor"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
)


def _prune_children(
    deps: Deps, svc: VLLMService, manifests: list[dict[str, Any]], logger: Any
) -> None:
    """Delete the optional children the spec no longer asks for (a monitor switched off, the
    NetworkPolicy removed) when this VLLMService controls them. Full passes only: a read per
    optional kind, no write unless one is there."""
    rendered = {m["kind"] for m in manifests}
    namespace, name = svc.metadata["namespace"], svc.metadata["name"]
    for api_version, kind in OPTIONAL_CHILDREN:
        if kind in rendered:
            continue
        try:
            current = deps.kube.get(api_version, kind, namespace, name)
            if current is not None and _controlled_by(current, svc.uid):
                deps.kube.delete(api_version, kind, namespace, name, uid=current["metadata"]["uid"])
                logger.info(f"deleted {kind} {namespace}/{name}: the spec no longer asks for it")
        except ApiException as exc:  # e.g. RBAC of an older chart: the child stays, as before
            logger.warning(f"cannot prune {kind} {namespace}/{name}: {_api_reason(exc)}")


def _controlled_by(obj: dict[str, Any], uid: str | None) -> bool:
    owners = obj.get("metadata", {}).get("ownerReferences") or []
    return uid is not None and any(o.get("uid") == uid and o.get("controller") for o in owners)


def _apply_children(
    deps: Deps,
    svc: VLLMService,
    manifests: list[dict[str, Any]],
    seen: Seen,
    logger: Any,
    *,
    fresh: bool,
) -> dict[str, Any] | None:
    """Apply every child whose observed state differs; return the Deployment as now stored.

    `fresh`: the service has never had a status, so no pass got as far as writing one. Its
    children are applied without reading them first: a create then costs one write per child
    and no read, and an apply of what may already be there is harmless (server-side apply).

    The Deployment goes last. Its pods, and the status passes their progress triggers, start
    only once the slower children are in (a Service create waits for its ClusterIP): those
    passes then do not wait behind this one on the service's lock, and Ready implies the
    Service. A child the API refuses does not keep the others out; the pass fails after them.
    """
    deployment = None
    refused: ApiException | None = None
    for manifest in sorted(manifests, key=lambda m: m["kind"] == "Deployment"):
        if seen.only is not None and manifest["kind"] not in seen.only:
            continue
        try:
            current = _apply_child(deps, svc, manifest, seen, logger, fresh=fresh)
        except ApiException as exc:  # the others still go in; the pass fails after them
            refused = refused or exc
            continue
        if manifest["kind"] == "Deployment":
            deployment = current
    if refused is not None:
        raise refused
    return deployment


def _apply_child(
    deps: Deps,
    svc: VLLMService,
    manifest: dict[str, Any],
    seen: Seen,
    logger: Any,
    *,
    fresh: bool,
) -> dict[str, Any] | None:
    """One child, applied if its observed state differs; returns it as now stored."""
    meta = manifest["metadata"]
    current = seen.children.get(manifest["kind"])
    if current is None and not fresh:
        current = deps.kube.get(
            manifest["apiVersion"], manifest["kind"], meta["namespace"], meta["name"]
        )
    if manifest["kind"] == "Deployment":
        manifest = choose_strategy(deps, svc, manifest, current, logger)
    desired = stamp_applied_hash(manifest, c.LABEL_APPLIED_HASH)
    autoscaling = svc.spec.autoscaling is not None and svc.spec.autoscaling.enabled
    hand_over = desired["kind"] == "Deployment" and autoscaling
    if hand_over and not tuner_owns_replicas(current) and "Deployment" in seen.children:
        # an event's copy may predate the hand-over: decide on the stored object
        current = deps.kube.get("apps/v1", "Deployment", meta["namespace"], meta["name"])
    if hand_over and not tuner_owns_replicas(current):
        patch = build_replicas_patch(svc, initial_replicas(svc))
        if current is None:  # created first, so the tuner's apply has something to patch
            current = deps.kube.apply(desired, field_manager=c.FM_RENDERER)
        current = deps.kube.apply(patch, field_manager=c.FM_TUNER)
    if current is None or not is_applied(desired, current):
        current = deps.kube.apply(desired, field_manager=c.FM_RENDERER)
    return current


def reconcile(
    body: dict[str, Any], *, deps: Deps, logger: logging.Logger | Any, seen: Seen = Seen()
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

    effective = None
    problem: tuple[str, str] | None = None
    gpu: dict[str, Any] | None = None
    try:
        svc = VLLMService.model_validate(body)
        rendered = render_all(svc, deps.cfg, overrides_from_status(svc))
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
            deployment = _apply_children(deps, svc, manifests, seen, logger, fresh=not previous)
        except ApiException as exc:
            # The API refused a child (quota, an exhausted Service IP range, a webhook): say so
            # in status, then fail the pass: handlers/passes.py retries it with back-off.
            stored = _stored_deployment(deps, namespace, name, seen)
            failed = Observed(stored, problem=(c.REASON_APPLY_FAILED, _api_reason(exc)))
            _write_status(deps, body, previous, failed, effective, now, logger)
            raise
        if previous and seen.only is None:
            _prune_children(deps, svc, manifests, logger)
            sync_canary(deps, svc, logger)
        rollout = read_rollout(deployment or {})
        ready = deployment is not None and rollout.ready >= rollout.desired
        pods = seen.pods
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

    _write_status(deps, body, previous, observed, effective, now, logger)


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


def _api_reason(exc: ApiException) -> str:
    try:
        message = str(json.loads(exc.body or "{}").get("message") or exc.reason)
    except ValueError:
        message = str(exc.reason)
    return f"The API server refused a child object ({exc.status}): {message}"


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
    apply_status(deps.kube, body, patch, field_manager=c.FM_STATUS)
    for cond in newsworthy(previous.get("conditions") or [], status["conditions"]):
        bad = (cond["type"] == c.COND_READY) != (cond["status"] == "True")
        deps.kube.emit_event(
            body,
            type="Warning" if bad else "Normal",
            reason=cond["reason"],
            message=cond["message"],
            now=now,
        )
        logger.info(
            "%s/%s %s=%s: %s", namespace, name, cond["type"], cond["status"], cond["message"]
        )


def reconcile_by_name(
    namespace: str,
    name: str,
    *,
    deps: Deps,
    logger: logging.Logger | Any,
    body: dict[str, Any] | None = None,
    seen: Seen = Seen(),
) -> None:
    """Reconcile the VLLMService that owns a child that changed (it may be gone already)."""
    with one_pass_at_a_time(namespace, name):  # read the parent after the pass before wrote it
        if body is None:
            body = deps.kube.get(c.API_VERSION, c.KIND, namespace, name)
        if body is not None and not body["metadata"].get("deletionTimestamp"):
            reconcile(body, deps=deps, logger=logger, seen=seen)


def spec_unreconciled(body: dict[str, Any]) -> bool:
    """No pass has reported on this generation of the spec yet (pure)."""
    status = body.get("status") or {}
    return bool(status.get("observedGeneration") != body["metadata"].get("generation"))
