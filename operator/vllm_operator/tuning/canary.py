"""A budget change judged on one canary pod against the stable pods, on the same traffic (pure).

The before/after judgement of tuning/evaluate.py compares two windows, so a change of traffic
between them can pass for an effect of the change. A canary runs the new flags beside the
stable pods, behind the same Service, and both sides are measured over the same window: the
comparison is of the same minutes and the same clients. The figures that decide are the ones
evaluate.JUDGED names for the field and direction (what the change targeted, what it put at
risk), and "clearly worse" is the same margin (settings.rollback_margin):

  * a targeted figure of the canary is over its target and worse than the stable pods' by the
    margin;
  * a figure the change put at risk is within its target on the stable pods and over it by the
    margin on the canary.

Either removes the canary (and holds that direction, as a rollback does); otherwise the change
is promoted to every pod. The canary is judged only once its pod is ready and the window holds
figures from after that, and only when it served enough requests for its figures to mean
something; a canary that never gets them within `canary_deadline` is removed unjudged.

With spec.autotune.canary on (mode Auto), `divert_to_canary` turns a budget move of decide()
into a canary start: the stable pods keep their flags, status.tuning.canary records the change
and the reconcile runs it on one extra pod. While it runs, `decide_canary` takes the place of
decide(): it waits, promotes (the override goes to every pod) or removes the canary and holds
the direction as a rollback does. docs/rollouts.md §5.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Final, Literal, cast, get_args

from vllm_operator.api.budgets import budget_change
from vllm_operator.tuning.evaluate import ANY_CHANGE, JUDGED, figure_target, format_figure
from vllm_operator.tuning.inputs import Targets
from vllm_operator.tuning.model import Action, BudgetKey, Canary, Decision, Hold, TuningState
from vllm_operator.tuning.reasons import Reason
from vllm_operator.tuning.settings import TuningSettings

MIN_CANARY_REQUESTS: Final = 20  # finished on the canary within the window, to judge at all


def describe(canary: Canary) -> str:
    return budget_change(canary.field, canary.from_value, canary.to_value)


@dataclass(frozen=True)
class CanaryVerdict:
    kind: Literal["Wait", "Promote", "Remove"]
    message: str  # one sentence, with both sides' figures once judged


def _side_by_side(name: str, canary: float, stable: float) -> str:
    return f"{name} {format_figure(name, canary)} on the canary vs {format_figure(name, stable)}"


def judge_canary(
    canary: Canary,
    on_canary: Mapping[str, float],
    on_stable: Mapping[str, float],
    *,
    targets: Targets,
    now: datetime,
    window: timedelta,
    evaluation_delay: timedelta,
    deadline: timedelta,
    margin: float,
    hold: timedelta,
    preemption_max: float = 0.0,
) -> CanaryVerdict:
    """Promote, remove or wait, from each side's figures over the same window.

    `on_canary` and `on_stable` are MetricsSnapshot.figures() of the two pod groups; the
    canary's request_rate over the window tells whether it saw enough traffic to judge.
    """
    change = describe(canary)
    if canary.ready_at is None:
        if now - canary.started_at > deadline:
            return CanaryVerdict("Remove", f"canary {change} never got ready: removed")
        return CanaryVerdict("Wait", f"canary {change} is starting")
    wait = max(evaluation_delay, window)
    if now < canary.ready_at + wait:
        left = (canary.ready_at + wait - now).total_seconds()
        return CanaryVerdict("Wait", f"canary {change} is judged in {left:.0f}s")
    if on_canary.get("request_rate", 0.0) * window.total_seconds() < MIN_CANARY_REQUESTS:
        if now - canary.started_at > deadline:
            message = f"canary {change} saw too little traffic to judge: removed"
            return CanaryVerdict("Remove", message)
        return CanaryVerdict("Wait", f"canary {change} waits for traffic to judge")
    targeted, guarded = JUDGED.get((canary.field, canary.direction), ANY_CHANGE)
    pairs = [
        (name, on_canary[name], on_stable[name])
        for name in (*targeted, *guarded)
        if name in on_canary and name in on_stable
    ]
    quoted = "; ".join(_side_by_side(*p) for p in pairs) or "no comparable figures"
    for name, c, s in pairs:
        target = figure_target(name, targets, preemption_max)
        if target is None:
            continue
        worse_target = name in targeted and c > target and c > s * (1 + margin)
        broke_guard = name in guarded and s <= target and c > target * (1 + margin)
        if worse_target or broke_guard:
            why = _side_by_side(name, c, s)
            return CanaryVerdict(
                "Remove",
                f"canary {change} made {why} on the stable pods: removed, no move "
                f"{canary.direction} for {hold.total_seconds():.0f}s ({quoted})",
            )
    return CanaryVerdict("Promote", f"canary {change} held: {quoted}; promoted")


def divert_to_canary(decision: Decision, before: TuningState, now: datetime) -> Decision:
    """A budget move of decide() as a canary start: the stable pods keep `before`'s overrides,
    no before/after judgement is pending, the restart budget and cooldown count it as decided.
    Anything else (a hold, a scale, a rollback) passes unchanged."""
    action = decision.action
    field = action.field
    if not decision.applied or action.kind != "SetBudget" or action.to_value is None:
        return decision
    if field not in get_args(BudgetKey):
        return decision
    canary = Canary(cast(BudgetKey, field), action.from_value, action.to_value, started_at=now)
    state = replace(decision.state, overrides=dict(before.overrides), pending=None, canary=canary)
    message = f"{decision.message}; on a canary pod first"
    return replace(decision, reason=Reason.CANARY_STARTED, message=message, state=state)


def decide_canary(
    state: TuningState,
    verdict: CanaryVerdict,
    figures: dict[str, float],
    now: datetime,
    settings: TuningSettings,
) -> Decision:
    """The pass while a canary runs: its verdict as a decision and the state after it."""
    canary = state.canary
    assert canary is not None, "decide_canary needs a running canary"
    if verdict.kind == "Wait":
        return Decision(Action("Hold"), Reason.CANARY_JUDGING, verdict.message, figures, state)
    if verdict.kind == "Promote":
        overrides = {**state.overrides, canary.field: canary.to_value}
        promoted = replace(state, overrides=overrides, canary=None, capacity=None)
        action = Action("SetBudget", canary.field, canary.from_value, canary.to_value)
        return Decision(action, Reason.CANARY_PROMOTED, verdict.message, figures, promoted)
    held = Hold(canary.field, canary.direction, now + settings.hold_after_rollback)
    removed = replace(state, canary=None, holds=(*state.holds, held))
    action = Action("Rollback", canary.field, canary.to_value, canary.from_value)
    return Decision(action, Reason.CANARY_REMOVED, verdict.message, figures, removed)
