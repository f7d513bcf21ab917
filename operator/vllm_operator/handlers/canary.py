"""The canary's I/O: its Deployment (reconcile) and its figures (tune), around pure code.

tuning/canary.py decides; render/canary.py renders. Here the reconcile applies the canary
Deployment that status.tuning.canary asks for and deletes one that is no longer asked for, and
the tuner reads the canary's readiness and both pod groups' figures. docs/rollouts.md §5.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from kubernetes.client.exceptions import ApiException

from vllm_operator import constants as c
from vllm_operator.api.budgets import BUDGET_FIELDS, BudgetField
from vllm_operator.api.durations import parse_duration
from vllm_operator.api.status import CanaryStatus
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.handlers.deps import Deps
from vllm_operator.metrics.prometheus import build_prometheus, query_snapshot
from vllm_operator.metrics.queries import PodGroup
from vllm_operator.render import RenderError, overrides_from_status
from vllm_operator.render.canary import canary_name, render_canary
from vllm_operator.render.drift import is_applied, stamp_applied_hash
from vllm_operator.tuning.canary import decide_canary, judge_canary
from vllm_operator.tuning.inputs import canary_on, targets_of
from vllm_operator.tuning.model import Decision, MetricsSnapshot, TuningState
from vllm_operator.tuning.settings import TuningSettings


def _may_have_canary(svc: VLLMService) -> bool:
    """Only services that turned canaries on, or still record one, pay a read for it."""
    tuning = svc.status.tuning if svc.status else None
    return canary_on(svc.spec) or (tuning is not None and tuning.canary is not None)


def wanted_canary(svc: VLLMService) -> tuple[CanaryStatus, BudgetField] | None:
    """The canary status.tuning.canary asks for, and its budget field; None: a canary pod of
    this service is one the reconcile deletes (promoted, removed, or canaries switched off)."""
    tuning = svc.status.tuning if svc.status else None
    canary = tuning.canary if tuning is not None and canary_on(svc.spec) else None
    field = (
        None if canary is None else next((f for f in BUDGET_FIELDS if f.key == canary.field), None)
    )
    return None if canary is None or field is None else (canary, field)


def sync_canary(deps: Deps, svc: VLLMService, logger: logging.Logger | Any) -> None:
    """Apply the canary Deployment status.tuning.canary asks for; delete one it no longer does."""
    if not _may_have_canary(svc):
        return
    namespace, name = svc.namespace or "", canary_name(svc.name)
    current = deps.kube.get("apps/v1", "Deployment", namespace, name)
    wanted = wanted_canary(svc)
    if wanted is None:
        owners = [] if current is None else current["metadata"].get("ownerReferences") or []
        if any(o.get("uid") == svc.uid and o.get("controller") for o in owners):
            assert current is not None
            uid = current["metadata"]["uid"]
            deps.kube.delete("apps/v1", "Deployment", namespace, name, uid=uid)
            logger.info("deleted the canary %s/%s: no canary is running", namespace, name)
        return
    canary, field = wanted
    try:
        overrides = overrides_from_status(svc)
        manifest = render_canary(svc, deps.cfg, overrides, field.key, canary.to_value)
    except RenderError as exc:  # the tuner's next pass removes a canary that never gets ready
        logger.warning("canary %s/%s not rendered: %s", namespace, name, exc)
        return
    desired = stamp_applied_hash(manifest, c.LABEL_APPLIED_HASH)
    if current is None or not is_applied(desired, current):
        try:
            deps.kube.apply(desired, field_manager=c.FM_RENDERER)
        except ApiException as exc:  # the stable pods serve on; the next pass tries again
            logger.warning("canary %s/%s not applied: %s", namespace, name, exc.reason)


def judge_running_canary(
    deps: Deps,
    svc: VLLMService,
    state: TuningState,
    snapshot: MetricsSnapshot,
    now: datetime,
    settings: TuningSettings,
    logger: logging.Logger | Any,
) -> Decision:
    """The tuning pass while a canary runs: its readiness and both sides' figures, judged.

    A canary recorded in status whose Deployment is missing is applied here: the pass that
    recorded it died before its re-render (tuning/plan.py). The resync would apply it too, but
    up to resyncSeconds (300 s) later, a quarter of the canary's deadline."""
    canary = state.canary
    assert canary is not None
    namespace = svc.namespace or ""
    if canary.ready_at is None:
        dep = deps.kube.get("apps/v1", "Deployment", namespace, canary_name(svc.name))
        if dep is None:
            sync_canary(deps, svc, logger)
        elif int(dep.get("status", {}).get("readyReplicas", 0)) >= 1:
            canary = replace(canary, ready_at=now)
            state = replace(state, canary=canary)
    window = parse_duration(deps.cfg.metrics_window)
    prom = deps.prometheus or build_prometheus(deps.cfg)
    sides: dict[str, dict[str, float]] = {}
    groups: tuple[tuple[PodGroup, int], ...] = (("canary", 1), ("stable", snapshot.pods_expected))
    for group, pods in groups:
        sides[group] = query_snapshot(
            prom, namespace, svc.name, window=window, now=now, expected_pods=pods, fleet=None,
            stale_after=settings.staleness_limit.total_seconds(), group=group,
        ).figures()  # fmt: skip
    verdict = judge_canary(
        canary, sides["canary"], sides["stable"], targets=targets_of(svc.spec, settings),
        now=now, window=timedelta(seconds=window),
        evaluation_delay=settings.rollback_evaluation_delay,
        deadline=settings.canary_deadline, margin=settings.rollback_margin,
        hold=settings.hold_after_rollback, preemption_max=settings.preemption_rate_max,
    )  # fmt: skip
    return decide_canary(state, verdict, snapshot.figures(), now, settings)
