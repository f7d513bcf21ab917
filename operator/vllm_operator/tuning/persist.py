"""TuningState <-> status.tuning: the tuner remembers nothing in memory between passes.

Bounded on the way out: last_decisions keeps the newest MAX_DECISIONS, and a pass that repeats
the previous record (same action, reason, field, values and applied flag) replaces it instead of
pushing real decisions out of the list; restart_times keeps only the restart window (one hour).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import cast, get_args

from vllm_operator.api.budgets import BUDGET_FIELDS
from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.api.status import (
    MAX_DECISIONS,
    MAX_HOLDS,
    MAX_RESTART_TIMES,
    MAX_WINDOW_SAMPLES,
    BudgetValues,
    CanaryStatus,
    CapacityStatus,
    ForecastStatus,
    ModelCapacityStatus,
    PendingRetuneStatus,
    ReadyTimeStatus,
    TuningDecisionRecord,
    TuningHold,
    TuningStatus,
    WindowSample,
)
from vllm_operator.tuning.forecast import READY_TIME_MAX
from vllm_operator.tuning.model import (
    CAPACITY_MIN,
    RATE_MAX,
    BudgetKey,
    Canary,
    Capacity,
    Decision,
    Forecast,
    Hold,
    PendingRetune,
    RateSample,
    ReadyTime,
    TuningState,
)
from vllm_operator.tuning.settings import TuningSettings
from vllm_operator.tuning.state import normalize_state

_KEYS: frozenset[str] = frozenset(get_args(BudgetKey))
_DEFAULT_SETTINGS = TuningSettings()
_RATE = "request_rate"  # the figure a status.tuning.window sample carries for the forecast
_CAPACITY = "model_capacity"  # and the engine model's per-pod capacity, for the scale-down


def _key(name: str) -> BudgetKey | None:
    return cast(BudgetKey, name) if name in _KEYS else None


def state_from_status(
    status: TuningStatus | None,
    spec: VLLMServiceSpec,
    settings: TuningSettings = _DEFAULT_SETTINGS,
) -> TuningState:
    """The state status.tuning records, normalised for `spec` (state.py: e.g. no overrides
    outside mode Auto). Unknown field names, from a newer or older operator, are dropped."""
    if status is None:
        return normalize_state(TuningState(), spec, settings)
    values = status.overrides or BudgetValues()
    overrides: dict[str, int] = {
        f.key: v for f in BUDGET_FIELDS if (v := getattr(values, f.attr)) is not None
    }
    pending = None
    p = status.pending
    if p is not None and (field := _key(p.field)) is not None:
        pending = PendingRetune(
            field, p.from_value, p.to_value, p.applied_at, dict(p.before), p.settled_at
        )
    holds = tuple(
        Hold(field, h.direction, h.until) for h in status.holds if (field := _key(h.field))
    )
    canary = None
    if (k := status.canary) is not None and (field := _key(k.field)) is not None:
        canary = Canary(field, k.from_value, k.to_value, k.started_at, k.ready_at)
    state = TuningState(
        desired_replicas=status.desired_replicas,
        overrides=overrides,
        last_scale_at=status.last_scale_time,
        last_scale_from=status.last_scale_from,
        scale_down_votes=status.scale_down_votes or 0,
        retune_cooldown_until=status.cooldown_until,
        restart_times=tuple(status.restart_times),
        pending=pending,
        holds=holds,
        capacity=(
            Capacity(c.per_pod, c.learned_at)
            if (c := status.capacity) is not None and _plausible_capacity(c.per_pod)
            else None
        ),
        canary=canary,
        ready_time=(
            ReadyTime(min(r.seconds, READY_TIME_MAX), r.learned_at)
            if (r := status.ready_time) is not None and math.isfinite(r.seconds)
            else None
        ),
        arrivals=tuple(
            RateSample(w.time, w.figures[_RATE], _capacity_figure(w.figures))
            for w in status.window
            if _RATE in w.figures
        ),
        problem_since=status.problem_since,
        fewer_pods_looked_at=status.fewer_pods_looked_at,
    )
    return normalize_state(state, spec, settings)


def _record(decision: Decision, now: datetime) -> TuningDecisionRecord:
    action = decision.action
    return TuningDecisionRecord(
        time=now,
        action=action.kind,
        reason=decision.reason,
        message=decision.message,
        field=action.field,
        from_value=action.from_value,
        to_value=action.to_value,
        applied=decision.applied,
        figures=dict(decision.figures),
    )


def _same(a: TuningDecisionRecord, b: TuningDecisionRecord) -> bool:
    keys = ("action", "reason", "field", "from_value", "to_value", "applied")
    return all(getattr(a, k) == getattr(b, k) for k in keys)


def records_anew(previous: TuningStatus | None, decision: Decision) -> bool:
    """Whether the decision is a new entry of last_decisions, not a repeat of the newest one:
    what the operator's log tells (handlers/tune.py)."""
    history = [] if previous is None else previous.last_decisions
    return not history or not _same(history[-1], _record(decision, history[-1].time))


def _history(
    previous: TuningStatus | None, record: TuningDecisionRecord
) -> list[TuningDecisionRecord]:
    history = [] if previous is None else list(previous.last_decisions)
    if history and _same(history[-1], record):
        history[-1] = record  # a repeat: fresh time and figures, no new entry
    else:
        history.append(record)
    return history[-MAX_DECISIONS:]


def _pending_status(p: PendingRetune) -> PendingRetuneStatus:
    return PendingRetuneStatus(
        field=p.field,
        from_value=p.from_value,
        to_value=p.to_value,
        applied_at=p.applied_at,
        settled_at=p.settled_at,
        before=dict(p.before),
    )


def budget_values(overrides: Mapping[str, int]) -> BudgetValues:
    """The tuner's overrides (BudgetKey -> value) as status.tuning.overrides and the renderer
    take them."""
    return BudgetValues(**{f.attr: overrides.get(f.key) for f in BUDGET_FIELDS})


def status_from_state(
    state: TuningState,
    decision: Decision,
    previous: TuningStatus | None,
    now: datetime,
    *,
    mode: str | None = None,
    settings: TuningSettings = _DEFAULT_SETTINGS,
) -> TuningStatus:
    """status.tuning after a pass: `state` (normally decision.state) plus the decision's record.

    `mode` is the autotune mode in force (spec.autotune.mode); the previous one is kept when None.
    """
    restarts = [t for t in state.restart_times if now - t < settings.restart_window]
    return TuningStatus(
        mode=mode if mode is not None else (previous.mode if previous is not None else None),
        overrides=budget_values(state.overrides) if state.overrides else None,
        desired_replicas=state.desired_replicas,
        last_evaluated=now,
        last_decisions=_history(previous, _record(decision, now)),
        restarts_in_last_hour=len(restarts),
        restart_times=restarts[-MAX_RESTART_TIMES:],
        cooldown_until=state.retune_cooldown_until,
        last_scale_time=state.last_scale_at,
        last_scale_from=state.last_scale_from,
        scale_down_votes=state.scale_down_votes,
        pending=None if state.pending is None else _pending_status(state.pending),
        holds=[
            TuningHold(field=h.field, direction=h.direction, until=h.until) for h in state.holds
        ][-MAX_HOLDS:],
        capacity=(
            None
            if (c := state.capacity) is None
            else CapacityStatus(per_pod=c.per_pod, learned_at=c.at)
        ),
        canary=None if (k := state.canary) is None else _canary_status(k),
        ready_time=(
            None
            if (r := state.ready_time) is None
            else ReadyTimeStatus(seconds=r.seconds, learned_at=r.at)
        ),
        forecast=None if decision.forecast is None else _forecast_status(decision.forecast),
        problem_since=state.problem_since,
        fewer_pods_looked_at=state.fewer_pods_looked_at,
        model_capacity=(
            None
            if (m := decision.model_capacity) is None
            else ModelCapacityStatus(per_pod=m.per_pod, workload=m.basis, computed_at=m.at)
        ),
        capacity_source=decision.capacity_source,
        window=[WindowSample(time=a.at, figures=_window_figures(a)) for a in state.arrivals][
            -MAX_WINDOW_SAMPLES:
        ],
    )


def _window_figures(sample: RateSample) -> dict[str, float]:
    if sample.capacity is None:
        return {_RATE: sample.rate}
    return {_RATE: sample.rate, _CAPACITY: sample.capacity}


def _capacity_figure(figures: Mapping[str, float]) -> float | None:
    """A remembered model capacity, None unless it is one a pass could have given."""
    value = figures.get(_CAPACITY)
    return value if value is not None and _plausible_capacity(value) else None


def _plausible_capacity(per_pod: float) -> bool:
    """Whether a per-pod capacity read from status is one a pass could have written: 0, a
    subnormal or a NaN (the CRD allows them; the status is writable by anyone with the
    subresource) would divide the pods needed."""
    return CAPACITY_MIN <= per_pod <= RATE_MAX


def _forecast_status(f: Forecast) -> ForecastStatus:
    return ForecastStatus(
        request_rate=f.rate,
        current_rate=f.now_rate,
        trend_per_minute=f.slope * 60,
        horizon_seconds=f.horizon,
        ready_time_source=f.ready_time_source,
        past_period_rate=f.past_period_rate,
    )


def _canary_status(k: Canary) -> CanaryStatus:
    return CanaryStatus(
        field=k.field,
        from_value=k.from_value,
        to_value=k.to_value,
        started_at=k.started_at,
        ready_at=k.ready_at,
    )
