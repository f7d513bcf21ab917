"""Rule 1: judge a budget change once its rollout is done; roll it back if it made things worse.

The clock starts when the fleet is first steady after the change (settled_at), and the judgement
waits until the snapshot window holds only figures from after that: max(rollback evaluation
delay, window). "Clearly worse" is one of:
  * a figure the change targeted is over its target and worse than before by the margin;
  * a figure the change put at risk was within its target before and is now over it by the margin.
Everything else keeps the change (a change that did not help is kept; the next rule may go on).
A figure that got worse while traffic rose beyond the load tolerance says nothing about the change,
so it keeps the change too. A rollback is not held by maxRestartsPerHour: it undoes the tuner's own
change, and a harmful change held for up to an hour is what the budget exists to prevent.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Literal

from vllm_operator.api.budgets import budget_change
from vllm_operator.tuning import signals
from vllm_operator.tuning.inputs import Inputs, Targets, spec_budget
from vllm_operator.tuning.model import Action, Decision, Hold, PendingRetune
from vllm_operator.tuning.outcome import hold
from vllm_operator.tuning.reasons import Reason

_LATENCY = ("rejection_ratio", "ttft_p95", "itl_p95")  # need trusted rates to mean anything
# (field, direction) -> (figures the change targeted, figures it put at risk); the canary
# judgement (tuning/canary.py) reads the same table
JUDGED: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {
    ("maxRequests", "up"): (("rejection_ratio",), ("ttft_p95",)),
    ("maxPrefillTokens", "up"): (("rejection_ratio",), ("ttft_p95",)),
    ("maxActiveSeqs", "down"): (("itl_p95", "preemption_rate"), ("ttft_p95", "rejection_ratio")),
    ("maxActiveSeqs", "up"): (("ttft_p95",), ("itl_p95",)),
    ("maxBatchedTokens", "up"): (("ttft_p95",), ("itl_p95",)),
}
ANY_CHANGE: tuple[tuple[str, ...], tuple[str, ...]] = ((), _LATENCY)


def direction_of(p: PendingRetune) -> Literal["up", "down"]:
    return "up" if p.from_value is None or p.to_value > p.from_value else "down"


def figure_target(figure: str, targets: Targets, preemption_max: float) -> float | None:
    """The target a judged figure is held to (None: the SLO sets none)."""
    return {
        "rejection_ratio": targets.max_rejection_ratio,
        "ttft_p95": targets.ttft,
        "itl_p95": targets.itl,
        "preemption_rate": preemption_max,
    }.get(figure)


def _target(i: Inputs, figure: str) -> float | None:
    return figure_target(figure, i.targets, i.settings.preemption_rate_max)


def format_figure(figure: str, value: float) -> str:
    if figure == "rejection_ratio":
        return signals.fmt_pct(value)
    if figure == "preemption_rate":
        return f"{value:.3g}/s"
    return signals.fmt_s(value)


def _pairs(i: Inputs, p: PendingRetune, figures: tuple[str, ...]) -> list[tuple[str, float, float]]:
    after = i.snapshot.figures()
    out = []
    for name in figures:
        b, a = p.before.get(name), after.get(name)
        if b is not None and a is not None and (i.rates_trusted or name not in _LATENCY):
            out.append((name, b, a))
    return out


def _change(name: str, b: float, a: float) -> str:
    return f"{name} {format_figure(name, b)} -> {format_figure(name, a)}"


def worse(i: Inputs, p: PendingRetune) -> str | None:
    """The phrase of the first figure that makes the change clearly worse, else None."""
    targeted, guarded = JUDGED.get((p.field, direction_of(p)), ANY_CHANGE)
    margin = 1 + i.settings.rollback_margin
    for name, b, a in _pairs(i, p, targeted):
        target = _target(i, name)
        if target is not None and a > target and a > b * margin:
            return _change(name, b, a)
    for name, b, a in _pairs(i, p, guarded):
        target = _target(i, name)
        if target is not None and b <= target and a > target * margin:
            return f"{_change(name, b, a)} (target {format_figure(name, target)})"
    return None


def _rollback(i: Inputs, p: PendingRetune, why: str, change: str) -> Decision:
    overrides = dict(i.state.overrides)
    restored = p.from_value
    if restored is None or restored == spec_budget(i.spec, p.field):
        overrides.pop(p.field, None)
    else:
        overrides[p.field] = restored
    direction = direction_of(p)
    state = replace(
        i.state,
        overrides=overrides,
        pending=None,
        restart_times=(*i.state.restart_times, i.now),
        retune_cooldown_until=i.now + i.settings.retune_cooldown,
        holds=(*i.state.holds, Hold(p.field, direction, i.now + i.settings.hold_after_rollback)),
        capacity=None,  # learned under the change just undone
    )
    held = i.settings.hold_after_rollback.total_seconds()
    message = f"{change} made {why}: rolled back, no move {direction} for {held:.0f}s"
    action = Action("Rollback", p.field, p.to_value, p.from_value)
    return Decision(action, Reason.ROLLBACK_WORSE, message, i.snapshot.figures(), state)


def pending_rule(i: Inputs) -> Decision | None:
    p = i.state.pending
    if p is None:
        return None
    change = budget_change(p.field, p.from_value, p.to_value)
    wait = max(i.settings.rollback_evaluation_delay, timedelta(seconds=i.snapshot.window_seconds))
    if p.settled_at is None:
        state = replace(i.state, pending=replace(p, settled_at=i.now))
        message = (
            f"{change} rolled out; judging it after {wait.total_seconds():.0f}s of fresh figures"
        )
        return hold(Reason.RETUNE_SETTLING, message, i.snapshot, state)
    if i.now < p.settled_at + wait:
        left = (p.settled_at + wait - i.now).total_seconds()
        return hold(
            Reason.RETUNE_SETTLING, f"{change} is judged in {left:.0f}s", i.snapshot, i.state
        )
    why = worse(i, p)
    kept = replace(i.state, pending=None)
    if why is None:
        targeted, guarded = JUDGED.get((p.field, direction_of(p)), ANY_CHANGE)
        seen = (
            ", ".join(_change(*t) for t in _pairs(i, p, targeted + guarded))
            or "no comparable figures"
        )
        return hold(Reason.RETUNE_KEPT, f"{change} kept: {seen}", i.snapshot, kept)
    rise = load_rise(i, p)
    if rise is not None:
        message = f"{change} kept: {why}, but {rise}, so the change is not to blame"
        return hold(Reason.RETUNE_KEPT, message, i.snapshot, kept)
    return _rollback(i, p, why, change)


def load_rise(i: Inputs, p: PendingRetune) -> str | None:
    """The phrase of a traffic rise beyond the tolerance since the change, else None."""
    before, after = p.before.get("request_rate"), i.snapshot.request_rate
    if before is None or after is None or before <= 0:
        return None
    if after <= before * (1 + i.settings.judgement_load_tolerance):
        return None
    return f"traffic rose {after / before - 1:.0%} ({before:.3g} -> {after:.3g} req/s)"
