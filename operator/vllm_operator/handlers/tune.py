"""One tuning pass for a VLLMService: observe (Prometheus), decide (pure), act, record.

Replicas go to the Deployment under the tuner's field manager; budget changes go to
status.tuning.overrides and reach the pods through the same renderer as the spec, so the
Deployment rolls with the new flags. Nothing here writes spec.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from vllm_operator import constants as c
from vllm_operator.api.durations import parse_duration
from vllm_operator.api.status import MetricsStatus
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.handlers.deps import Deps
from vllm_operator.handlers.reconcile import reconcile
from vllm_operator.handlers.replicas import build_replicas_patch
from vllm_operator.metrics.prometheus import QueryFailure, build_prometheus, query_snapshot
from vllm_operator.observability import DECISIONS, PROMETHEUS_ERRORS
from vllm_operator.status.conditions import set_condition
from vllm_operator.status.summarize import read_rollout
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.model import Decision, FleetView, MetricsSnapshot
from vllm_operator.tuning.persist import state_from_status, status_from_state
from vllm_operator.tuning.settings import TuningSettings

BUDGET_ACTIONS = ("SetBudget", "Rollback")


def tuning_enabled(svc: VLLMService) -> bool:
    auto = svc.spec.autoscaling
    mode = svc.spec.autotune.mode if svc.spec.autotune else "Off"
    return bool(auto and auto.enabled) or mode != "Off"


def build_fleet_view(deployment: dict[str, Any] | None) -> FleetView | None:
    if deployment is None:
        return None
    r = read_rollout(deployment)
    return FleetView(desired=r.desired, ready=r.ready, updated=r.updated, rolling=not r.rolled)


def build_metrics_status(snapshot: MetricsSnapshot, window: str, now: datetime) -> dict[str, Any]:
    status = MetricsStatus(
        window=window,
        observed_at=now,
        request_rate=snapshot.request_rate,
        rejection_rate=snapshot.rejection_rate,
        rejection_ratio=snapshot.rejection_ratio,
        ttft_p95_seconds=snapshot.ttft_p95,
        itl_p95_seconds=snapshot.itl_p95,
        e2e_p95_seconds=snapshot.e2e_p95,
        waiting_requests=snapshot.waiting,
        running_requests=snapshot.running,
        kv_cache_usage=snapshot.kv_usage,
        preemption_rate=snapshot.preemption_rate,
    )
    dumped: dict[str, Any] = status.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


def build_tuning_condition(
    previous: list[dict[str, Any]], decision: Decision, snapshot: MetricsSnapshot,
    generation: int, now: datetime,
) -> dict[str, Any]:  # fmt: skip
    """TuningActive: True while the tuner can see and act; False names why it holds."""
    conds = set_condition(
        [x for x in previous if x.get("type") == c.COND_TUNING_ACTIVE],
        type=c.COND_TUNING_ACTIVE,
        status="True" if snapshot.usable else "False",
        reason=decision.reason,
        message=decision.message,
        generation=generation,
        now=now,
    )
    return conds[0]


def tune(body: dict[str, Any], *, deps: Deps, logger: logging.Logger | Any) -> Decision | None:
    try:
        svc = VLLMService.model_validate(body)
    except ValidationError:
        return None  # the reconcile reports an invalid spec; there is nothing to tune
    if not tuning_enabled(svc):
        return None
    namespace, name = svc.namespace or "", svc.name
    now = deps.clock()
    settings = TuningSettings().time_scaled(deps.cfg.tuning_time_scale)
    deployment = deps.kube.get("apps/v1", "Deployment", namespace, name)
    fleet = build_fleet_view(deployment)

    def count_error(failure: QueryFailure) -> None:
        PROMETHEUS_ERRORS.labels(failure.kind).inc()

    snapshot = query_snapshot(
        deps.prometheus or build_prometheus(deps.cfg),
        namespace,
        name,
        window=parse_duration(deps.cfg.metrics_window),
        now=now,
        expected_pods=fleet.desired if fleet else 0,
        fleet=fleet,
        stale_after=settings.staleness_limit.total_seconds(),
        on_error=count_error,
    )
    previous = svc.status.tuning if svc.status else None
    decision = decide(
        svc.spec, snapshot, state_from_status(previous, svc.spec, settings), now, settings
    )
    action = decision.action
    DECISIONS.labels(action.kind, decision.reason, str(decision.applied).lower()).inc()

    if decision.applied and action.kind == "ScaleReplicas" and action.to_value is not None:
        deps.kube.apply(build_replicas_patch(svc, action.to_value), field_manager=c.FM_TUNER)

    mode = svc.spec.autotune.mode if svc.spec.autotune else "Off"
    tuning = status_from_state(
        decision.state, decision, previous, now, mode=mode, settings=settings
    )
    raw_status = body.get("status") or {}
    status = {
        "tuning": tuning.model_dump(by_alias=True, exclude_none=True, mode="json"),
        "metrics": build_metrics_status(snapshot, deps.cfg.metrics_window, now),
        "conditions": [
            build_tuning_condition(
                raw_status.get("conditions") or [], decision, snapshot,
                int(body["metadata"].get("generation", 1)), now,
            )
        ],
    }  # fmt: skip
    deps.kube.apply(
        {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND,
            "metadata": {"name": name, "namespace": namespace},
            "status": status,
        },
        field_manager=c.FM_TUNER,
        subresource="status",
    )
    if action.kind != "Hold":
        deps.kube.emit_event(
            body,
            type="Normal",
            reason=decision.reason,
            message=decision.message + ("" if decision.applied else " (recommendation only)"),
            now=now,
        )
        logger.info("%s/%s %s: %s", namespace, name, decision.reason, decision.message)
    if decision.applied and action.kind in BUDGET_ACTIONS:
        # The override is in status now: render it into the Deployment without waiting.
        fresh = deps.kube.get(c.API_VERSION, c.KIND, namespace, name)
        if fresh is not None:
            reconcile(fresh, deps=deps, logger=logger)
    return decision
