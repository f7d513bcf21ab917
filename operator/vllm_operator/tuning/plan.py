"""What one tuning pass writes, as a value: fetch -> decide -> plan -> execute.

`build_tune_plan` turns a decision into every write of the pass; the operator's handler
(handlers/tune.py) executes the plan with the Kubernetes client, the control-loop benchmark
(bench/control_loop/policies.py) against its simulated fleet. Both therefore act on a decision
in the same way: replicas when the decision applies a scale, a re-render (a restart of every
pod) when it applies a budget change, an Event for every decision that is not a hold. The
operator also applies what an earlier pass recorded and did not apply (below); the benchmark's
fleet never lacks it.

The status is the record of what the tuner decided, and is written first; the Deployment follows
it. A pass that dies between the two (an HA leader SIGKILLed) leaves a count or a budget
recorded and not applied: the next pass, by either operator, applies the recorded count and
re-renders the recorded overrides (handlers/tune.py: rendered_lags), instead of deciding the
same step again from the Deployment's lagging count or judging a budget no pod runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from vllm_operator import constants as c
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.tuning.model import Decision, MetricsSnapshot
from vllm_operator.tuning.persist import status_from_state
from vllm_operator.tuning.replicas import build_replicas_patch
from vllm_operator.tuning.report import build_metrics_status, build_tuning_condition
from vllm_operator.tuning.settings import TuningSettings

# Actions that change a budget: the override lands in status, the pods need the new flags.
BUDGET_ACTIONS: Final = ("SetBudget", "Rollback")


def tuning_enabled(svc: VLLMService) -> bool:
    auto = svc.spec.autoscaling
    mode = svc.spec.autotune.mode if svc.spec.autotune else "Off"
    return bool(auto and auto.enabled) or mode != "Off"


@dataclass(frozen=True)
class PlannedEvent:
    """A core/v1 Event on the VLLMService."""

    reason: str
    message: str
    type: str = "Normal"


@dataclass(frozen=True)
class TunePlan:
    """Every write one tuning pass makes, in the order the executor makes them."""

    decision: Decision
    status_patch: dict[str, Any]  # the VLLMService status subresource, tuner's field manager
    replicas_patch: dict[str, Any] | None  # the Deployment's spec.replicas, tuner's field manager
    events: tuple[PlannedEvent, ...]
    # a budget moved, or the Deployment lacks the overrides in force (handlers/tune.py:
    # rendered_lags): render status.tuning.overrides into the Deployment now
    rerender: bool
    overrides: dict[str, int]  # BudgetKey -> value in force after the pass (what rerender renders)

    @property
    def replicas(self) -> int | None:
        """The replica count the pass sets; None when it leaves the Deployment's alone."""
        if self.replicas_patch is None:
            return None
        count: int = self.replicas_patch["spec"]["replicas"]
        return count


def told(decision: Decision) -> str:
    """The decision's message as its Event and the operator's log tell it."""
    return decision.message + ("" if decision.applied else " (recommendation only)")


def build_tune_plan(
    svc: VLLMService,
    decision: Decision,
    snapshot: MetricsSnapshot,
    now: datetime,
    settings: TuningSettings,
    *,
    window: str,
    conditions: list[dict[str, Any]],
    applied_replicas: int | None = None,
) -> TunePlan:
    """The plan of one pass. `svc` is the service as read (its status.tuning is the previous
    one); `conditions` its stored status.conditions as written; `window` the metrics window;
    `applied_replicas` the Deployment's spec.replicas where the tuner owns it, else None."""
    action = decision.action
    count = decision.state.desired_replicas
    if decision.applied and action.kind == "ScaleReplicas" and action.to_value is not None:
        count = action.to_value
    elif applied_replicas is None or count == applied_replicas:
        count = None  # nothing decided, nothing recorded and missing
    replicas_patch = None if count is None else build_replicas_patch(svc, count)
    previous = svc.status.tuning if svc.status else None
    mode = svc.spec.autotune.mode if svc.spec.autotune else "Off"
    tuning = status_from_state(
        decision.state, decision, previous, now, mode=mode, settings=settings
    )
    generation = int(svc.metadata.get("generation", 1))
    status = {
        "tuning": tuning.model_dump(by_alias=True, exclude_none=True, mode="json"),
        "metrics": build_metrics_status(snapshot, window, now),
        "conditions": [build_tuning_condition(conditions, decision, snapshot, generation, now)],
    }
    events: tuple[PlannedEvent, ...] = ()
    if action.kind != "Hold":
        events = (PlannedEvent(decision.reason.value, told(decision)),)
    return TunePlan(
        decision=decision,
        status_patch={
            "apiVersion": c.API_VERSION,
            "kind": c.KIND,
            "metadata": {"name": svc.name, "namespace": svc.namespace or ""},
            "status": status,
        },
        replicas_patch=replicas_patch,
        events=events,
        rerender=decision.applied and action.kind in BUDGET_ACTIONS,
        overrides=dict(decision.state.overrides),
    )
