"""A VLLMService's children: applied where they drifted, side by side; pruned when the spec no
longer asks for them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from vllm_operator import constants as c
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.handlers.deps import Deps, InlineExecutor
from vllm_operator.handlers.rollout import choose_strategy
from vllm_operator.render.drift import is_applied, stamp_applied_hash
from vllm_operator.tuning.replicas import (
    build_replicas_patch,
    initial_replicas,
    tuner_owns_replicas,
)

_HERE = InlineExecutor()


@dataclass(frozen=True)
class Seen:
    """What the caller already observed (a watch event, the pod watch): no need to GET it again.

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


def prune_children(
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
            if current is not None and controlled_by(current, svc.uid):
                deps.kube.delete(api_version, kind, namespace, name, uid=current["metadata"]["uid"])
                logger.info(f"deleted {kind} {namespace}/{name}: the spec no longer asks for it")
        except ApiException as exc:  # e.g. RBAC of an older chart: the child stays, as before
            logger.warning(f"cannot prune {kind} {namespace}/{name}: {api_reason(exc)}")


def controlled_by(obj: dict[str, Any], uid: str | None) -> bool:
    owners = obj.get("metadata", {}).get("ownerReferences") or []
    return uid is not None and any(o.get("uid") == uid and o.get("controller") for o in owners)


def apply_children(
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

    All go in side by side (`deps.children`; none depends on another), so a pass waits for the
    slowest of them, not for their sum, and the Deployment is submitted first: its pods are what
    `Ready` waits for, and they start while a Service create waits for its ClusterIP (50 ms to
    seconds under load, docs/operator-scale.md). Until 2026-12-05 the Deployment went in last,
    after the others: 300 services through the operator were all Ready 1.50x as late as their
    children applied directly, with 10.5 s (p50) from a VLLMService to its Deployment. The
    status passes its progress triggers wait for this pass on the service's lock. A child the
    API refuses does not keep the others out; the pass fails after them.

    A Service goes to a pool of its own (`deps.service_applies`, a few threads): a Service
    create waits in the API server behind the others in flight, and more of them at once only
    made each slower and cost the API server more CPU (docs/operator-scale.md, 2026-12-05,
    "Services a few at a time").
    """

    def one(manifest: dict[str, Any]) -> dict[str, Any] | None:
        return apply_child(deps, svc, manifest, seen, logger, fresh=fresh)

    wanted = [m for m in manifests if seen.only is None or m["kind"] in seen.only]
    services = [m for m in wanted if m["kind"] == "Service"]
    others = sorted(
        (m for m in wanted if m["kind"] != "Service"), key=lambda m: m["kind"] != "Deployment"
    )
    # the Deployment first; the others but the last on the pool, the last on this thread (which
    # would only wait otherwise)
    outcomes = [(m["kind"], deps.children.submit(one, m)) for m in others[:-1]]
    outcomes += [(m["kind"], deps.service_applies.submit(one, m)) for m in services]
    outcomes += [(m["kind"], _HERE.submit(one, m)) for m in others[-1:]]
    refused: ApiException | None = None
    deployment = None
    for kind, outcome in outcomes:
        try:
            stored = outcome.result()
        except ApiException as exc:  # the others still go in; the pass fails after them
            refused = refused or exc
            continue
        if kind == "Deployment":
            deployment = stored
    if refused is not None:
        raise refused
    return deployment


def apply_child(
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


def api_reason(exc: ApiException) -> str:
    try:
        message = str(json.loads(exc.body or "{}").get("message") or exc.reason)
    except ValueError:
        message = str(exc.reason)
    return f"The API server refused a child object ({exc.status}): {message}"
