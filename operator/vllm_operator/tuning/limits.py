"""Guardrails of a budget move: range, step, cooldown, restart budget, holds after a rollback.

A move either comes back as a Move (the new state already written) or as a Blocked that names
what stopped it; rules then try their next remedy (outcome.py). The tuner never moves maxSeqs:
it sizes CUDA graphs and buffers and invalidates the compile cache (docs/vllm-0.33.md §1.4).
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime
from typing import Literal

from vllm_operator.api.budgets import BUDGET_FIELDS, BUDGETS_BY_KEY, budget_change
from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.tuning.inputs import Inputs, autotune_mode, spec_bound, spec_budget
from vllm_operator.tuning.model import Action, BudgetKey, PendingRetune, TuningState
from vllm_operator.tuning.outcome import Blocked, Move
from vllm_operator.tuning.reasons import Reason
from vllm_operator.tuning.rollout_room import rollout_blocker
from vllm_operator.tuning.settings import TuningSettings

Direction = Literal["up", "down"]


def label(key: BudgetKey) -> str:
    return BUDGETS_BY_KEY[key].label


def compute_at_bound(pinned: tuple[str, ...]) -> dict[str, int]:
    """vllm_operator_tuning_at_bound per field the tuner may move (maxSeqs it never does),
    labelled by its path under spec.budgets: 1 where the decision was pinned at a bound, else 0
    (so the series ends the alert as soon as the tuner is free again)."""
    return {label(f.key): int(f.key in pinned) for f in BUDGET_FIELDS if f.key != "maxSeqs"}


def allowed_range(
    spec: VLLMServiceSpec, key: str, settings: TuningSettings
) -> tuple[int, int] | None:
    """[lo, hi] the tuner may set `key` to; None when it may not move it at all.

    spec.autotune.bounds win where given; a side without a bound defaults to the spec value
    divided or multiplied by default_bound_factor. A field the spec leaves unset has no anchor
    (vLLM's default depends on the GPU) and is never moved, except maxActiveSeqs, anchored on
    maxSeqs. vLLM's own cross-field rules always apply on top (docs/vllm-0.33.md §1.4).
    """
    max_seqs = spec_budget(spec, "maxSeqs")
    base = spec_budget(spec, key)
    if base is None and key == "maxActiveSeqs":
        base = max_seqs
    if base is None or key == "maxSeqs":
        return None
    bound = spec_bound(spec, key)
    factor = settings.default_bound_factor
    lo = bound.min if bound is not None and bound.min is not None else math.ceil(base / factor)
    hi = bound.max if bound is not None and bound.max is not None else math.floor(base * factor)
    lo = max(lo, 1)
    if key == "maxActiveSeqs" and max_seqs is not None:
        hi = min(hi, max_seqs)
    if key == "maxBatchedTokens":
        engine = spec.engine
        if engine is not None and engine.enable_chunked_prefill is False and engine.max_model_len:
            lo = max(lo, engine.max_model_len)
        lo = max(lo, max_seqs or 1)
    return (lo, hi) if lo <= hi else None


def restarts_in_window(state: TuningState, now: datetime, settings: TuningSettings) -> int:
    return sum(1 for t in state.restart_times if now - t < settings.restart_window)


def restart_budget_blocker(i: Inputs) -> Blocked | None:
    limit = 0 if i.spec.autotune is None else i.spec.autotune.max_restarts_per_hour
    used = restarts_in_window(i.state, i.now, i.settings)
    if used < limit:
        return None
    return Blocked(Reason.RESTART_BUDGET_EXHAUSTED, f"{used} of {limit} restarts per hour used")


def _blocker(i: Inputs, key: BudgetKey, direction: Direction) -> Blocked | None:
    if not i.autotune_acts:
        return Blocked(Reason.AUTOTUNE_OFF, f"autotune is {autotune_mode(i.spec)}", disabled=True)
    for hold in i.state.holds:
        if hold.field == key and hold.direction == direction and i.now < hold.until:
            return Blocked(
                Reason.HOLD_AFTER_ROLLBACK, f"{label(key)} held {direction} after a rollback"
            )
    return retune_blocker(i)


def budget_move(i: Inputs, key: BudgetKey, direction: Direction, factor: float) -> Move | Blocked:
    """Move `key` by `factor` (clamped to the max step and the allowed range), or say why not."""
    current = i.budget(key)
    if current is None:
        return Blocked(Reason.BUDGET_UNSET, f"{label(key)} is unset (vLLM's default is unknown)")
    blocked = _blocker(i, key, direction)
    if blocked is not None:
        return blocked
    window = allowed_range(i.spec, key, i.settings)
    if window is None:
        return Blocked(Reason.BUDGET_AT_BOUND, f"{label(key)} has no range the tuner may use")
    lo, hi = window
    step = i.settings.max_budget_step
    if direction == "up":
        target = min(hi, max(current + 1, math.ceil(current * min(factor, step))))
    else:
        target = max(lo, min(current - 1, math.floor(current * max(factor, 1 / step))))
    if (direction == "up" and target <= current) or (direction == "down" and target >= current):
        edge, value = ("max", hi) if direction == "up" else ("min", lo)
        phrase = f"{label(key)} {current} at its {edge} {value}"
        return Blocked(Reason.BUDGET_AT_BOUND, phrase, pinned=(key,))
    if i.budget_blocker is not None:  # the engine model found no move worth its restarts
        return i.budget_blocker
    return rollout_blocker(i) or apply_budget(i, key, current, target)


def retune_blocker(i: Inputs) -> Blocked | None:
    """What stops any budget change now: the retune cooldown or the restart budget."""
    until = i.state.retune_cooldown_until
    if until is not None and i.now < until:
        left = (until - i.now).total_seconds()
        return Blocked(Reason.RETUNE_COOLDOWN, f"budget changes cool down for {left:.0f}s more")
    return restart_budget_blocker(i)


def apply_budget(i: Inputs, key: BudgetKey, current: int, target: int) -> Move:
    """`key` set from `current` to `target`: the override, restart, cooldown and judgement."""
    overrides = dict(i.state.overrides)
    if target == spec_budget(i.spec, key):
        overrides.pop(key, None)  # back at the spec's own value: nothing to override
    else:
        overrides[key] = target
    state = replace(
        i.state,
        overrides=overrides,
        restart_times=(*i.state.restart_times, i.now),
        retune_cooldown_until=i.now + i.settings.retune_cooldown,
        pending=PendingRetune(key, current, target, i.now, i.snapshot.figures()),
        capacity=None,  # another engine configuration, another capacity
    )
    action = Action("SetBudget", key, current, target)
    return Move(action, state, budget_change(key, current, target))
