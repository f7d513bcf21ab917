"""One tuning pass for a VLLMService: fetch (Prometheus), decide, plan (pure), execute.

Replicas go to the Deployment under the tuner's field manager; budget changes go to
status.tuning.overrides and reach the pods through the same renderer as the spec, so the
Deployment rolls with the new flags. Nothing here writes spec. What to write is decided by
tuning/plan.py; this module only reads the world and carries the plan out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from vllm_operator import constants as c
from vllm_operator.api.durations import parse_duration
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.handlers.canary import judge_running_canary
from vllm_operator.handlers.deps import Deps
from vllm_operator.handlers.reconcile import reconcile
from vllm_operator.handlers.rollout import observe_spare_pods
from vllm_operator.handlers.status_write import (
    STALE_ATTEMPTS,
    StaleReadError,
    apply_status,
    tuner_read_holds,
)
from vllm_operator.metrics.prometheus import (
    QueryFailure,
    build_prometheus,
    query_past_period,
    query_snapshot,
)
from vllm_operator.observability import AT_BOUND, DECISIONS, LOOKS, PROMETHEUS_ERRORS
from vllm_operator.render import RenderError
from vllm_operator.render.rollout import pod_template_hash
from vllm_operator.status.pods import selector_for
from vllm_operator.tuning.canary import divert_to_canary
from vllm_operator.tuning.decide import decide_seeing_spare_gpu
from vllm_operator.tuning.inputs import autotune_mode, canary_on
from vllm_operator.tuning.limits import compute_at_bound
from vllm_operator.tuning.model import CapacityEstimate, Decision, MetricsSnapshot, TuningState
from vllm_operator.tuning.model_capacity import capacity_estimates, model_capacity
from vllm_operator.tuning.persist import budget_values, records_anew, state_from_status
from vllm_operator.tuning.plan import TunePlan, build_tune_plan, told, tuning_enabled
from vllm_operator.tuning.replicas import applied_replicas
from vllm_operator.tuning.report import build_fleet_view
from vllm_operator.tuning.settings import TuningSettings
from vllm_operator.tuning.state import normalize_state


def tune(body: dict[str, Any], *, deps: Deps, logger: logging.Logger | Any) -> Decision | None:
    try:
        svc = VLLMService.model_validate(body)
    except ValidationError:
        return None  # the reconcile reports an invalid spec; there is nothing to tune
    if not tuning_enabled(svc):
        return None
    now = deps.clock()
    settings = TuningSettings().time_scaled(deps.cfg.tuning_time_scale)
    deployment = deps.kube.get("apps/v1", "Deployment", svc.namespace or "", svc.name)
    snapshot = fetch_snapshot(deps, svc, now, settings, deployment)
    previous = svc.status.tuning if svc.status else None
    state = state_from_status(previous, svc.spec, settings)
    if state.canary is not None:  # the canary's verdict takes the pass (docs/rollouts.md §5)
        state = normalize_state(state, svc.spec, settings, now)
        decision = judge_running_canary(deps, svc, state, snapshot, now, settings, logger)
    else:
        found = model_capacity(
            svc.spec, snapshot, state, settings, catalog=deps.catalog, cache=deps.capacity_cache
        )
        capacities = capacity_estimates(found)
        decision = decide_in_budget(deps, svc, snapshot, state, now, settings, capacities, logger)
        if canary_on(svc.spec):
            decision = divert_to_canary(decision, state, now)
    if records_anew(previous, decision):  # a repeat changes nothing worth a line
        logger.info(
            "%s/%s %s %s: %s", svc.namespace, svc.name, decision.action.kind,
            decision.reason.value, told(decision),
        )  # fmt: skip
    conditions = (body.get("status") or {}).get("conditions") or []
    plan = build_tune_plan(
        svc, decision, snapshot, now, settings, window=deps.cfg.metrics_window,
        conditions=conditions, applied_replicas=applied_replicas(deployment),
    )  # fmt: skip
    if not plan.rerender and rendered_lags(deps, svc, plan.overrides, deployment):
        plan = replace(plan, rerender=True)
    execute_plan(plan, body, deps=deps, logger=logger, now=now)
    return decision


def rendered_lags(
    deps: Deps, svc: VLLMService, overrides: dict[str, int], deployment: dict[str, Any] | None
) -> bool:
    """The Deployment's pod template is not the one the service renders to with the overrides
    the pass leaves in force (autotune mode Auto only: no other mode renders them). A pass that
    recorded a budget move and died before its re-render leaves that (tuning/plan.py); without
    the re-render the next passes would judge a change no pod runs."""
    if deployment is None or autotune_mode(svc.spec) != "Auto":
        return False
    try:
        rendered = deps.renders.render(svc, deps.cfg, budget_values(overrides))
    except RenderError:  # the reconcile reports it; nothing renders
        return False
    desired = next(
        (m for m in rendered.manifests if m["kind"] == "Deployment"
         and m["metadata"]["name"] == svc.name),
        None,
    )  # fmt: skip
    stored = pod_template_hash(deployment, c.LABEL_SPEC_HASH)
    return desired is not None and stored != pod_template_hash(desired, c.LABEL_SPEC_HASH)


def decide_in_budget(
    deps: Deps,
    svc: VLLMService,
    snapshot: MetricsSnapshot,
    state: TuningState,
    now: datetime,
    settings: TuningSettings,
    capacities: tuple[CapacityEstimate, ...],
    logger: logging.Logger | Any,
) -> Decision:
    """The pass's decision, its look for a budget move within the operator's look budget
    (tuning/look_budget.py), counted made or deferred."""

    def run(may_look: Callable[[], bool]) -> Decision:
        def take() -> bool:
            made = may_look()
            LOOKS.labels("made" if made else "deferred").inc()
            return made

        return decide_seeing_spare_gpu(
            svc.spec, snapshot, state, now, settings, capacities,
            lambda: observe_spare_pods(deps, svc, logger), take,
        )  # fmt: skip

    return deps.look_budget.metered(now, run)


def fetch_snapshot(
    deps: Deps,
    svc: VLLMService,
    now: datetime,
    settings: TuningSettings,
    deployment: dict[str, Any] | None,
) -> MetricsSnapshot:
    """The Deployment's rollout and the service's figures over the metrics window."""
    namespace, name = svc.namespace or "", svc.name
    # the pods' creation-to-Ready times are the forecast's horizon (tuning/forecast.py)
    pods = deps.kube.list("v1", "Pod", namespace, selector_for(name)) if deployment else []
    fleet = build_fleet_view(deployment, pods)

    def count_error(failure: QueryFailure) -> None:
        PROMETHEUS_ERRORS.labels(failure.kind).inc()

    prom = deps.prometheus or build_prometheus(deps.cfg)
    window = parse_duration(deps.cfg.metrics_window)
    snapshot = query_snapshot(
        prom,
        namespace,
        name,
        window=window,
        now=now,
        expected_pods=fleet.desired if fleet else 0,
        fleet=fleet,
        stale_after=settings.staleness_limit.total_seconds(),
        on_error=count_error,
    )
    scaling = svc.spec.autoscaling
    period = None if scaling is None or not scaling.enabled else scaling.forecast_period_seconds
    if period is None or snapshot.quality == "error":  # Prometheus failing: no second query
        return snapshot
    past = query_past_period(
        prom, namespace, name, window=window, now=now, period=period, on_error=count_error
    )
    return snapshot if past is None else replace(snapshot, past_period=past)


def execute_plan(
    plan: TunePlan,
    body: dict[str, Any],
    *,
    deps: Deps,
    logger: logging.Logger | Any,
    now: datetime,
) -> None:
    """The plan's writes, in order: status, replicas, events, then the re-render; none after a
    status write that is dropped (tuning/plan.py: the status is the record the rest follows)."""
    decision = plan.decision
    meta = body["metadata"]
    for field, pinned in compute_at_bound(decision.pinned).items():
        AT_BOUND.labels(meta["namespace"], meta["name"], field).set(pinned)
    if not write_tuner_status(deps, body, plan.status_patch, logger):
        return
    # counted once recorded: a decision whose record was refused was never taken
    DECISIONS.labels(
        decision.action.kind, decision.reason.value, str(decision.applied).lower()
    ).inc()
    if plan.replicas_patch is not None:
        deps.kube.apply(plan.replicas_patch, field_manager=c.FM_TUNER)
    for event in plan.events:
        deps.kube.emit_event(
            body, type=event.type, reason=event.reason, message=event.message, now=now
        )  # tune() logged the decision it tells of
    if plan.rerender:
        # The override is in status now: render it into the Deployment without waiting.
        fresh = deps.kube.get(c.API_VERSION, c.KIND, meta["namespace"], meta["name"])
        if fresh is not None:
            reconcile(fresh, deps=deps, logger=logger)


def write_tuner_status(
    deps: Deps, body: dict[str, Any], patch: dict[str, Any], logger: logging.Logger | Any
) -> bool:
    """The pass's memory, onto the status it was decided from (handlers/status_write.py); False
    when the write is dropped.

    A write that finds the service changed since `body` goes again onto a fresh read when only
    other fields moved (the reconcile's status). It is dropped when the spec or the tuner's memory
    moved: a newer spec, or a newer pass that decided meanwhile (an HA handover), whose memory
    stays; the next pass decides from it.
    """
    meta = body["metadata"]
    read = body
    for _ in range(STALE_ATTEMPTS):
        try:
            deps.services.note(apply_status(deps.kube, read, patch, field_manager=c.FM_TUNER))
            return True
        except StaleReadError:
            fresh = deps.kube.get(c.API_VERSION, c.KIND, meta["namespace"], meta["name"])
            if fresh is None or not tuner_read_holds(body, fresh):
                break
            read = fresh
    logger.warning(
        "%s/%s: the service changed under this tuning pass; its status write is dropped",
        meta["namespace"], meta["name"],
    )  # fmt: skip
    return False
