"""Bring remembered state in line with the spec in force before a pass reads it.

The renderer honours overrides only in autotune mode Auto, so in any other mode none are in force
and no retune is pending. An override the spec no longer allows (bounds narrowed, maxSeqs
lowered) is dropped: the spec's own value is then in force, as the user wrote it. Restart times
older than the restart window, expired holds and a learned capacity past its memory are
forgotten. This runs at the start of every pass and in state_from_status, and is idempotent.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.tuning.inputs import autoscaling_of, autotune_mode, spec_budget
from vllm_operator.tuning.limits import allowed_range
from vllm_operator.tuning.model import TuningState
from vllm_operator.tuning.settings import TuningSettings


def _allowed(spec: VLLMServiceSpec, key: str, value: int, settings: TuningSettings) -> bool:
    window = allowed_range(spec, key, settings)
    return window is not None and window[0] <= value <= window[1]


def normalize_state(
    state: TuningState,
    spec: VLLMServiceSpec,
    settings: TuningSettings,
    now: datetime | None = None,
) -> TuningState:
    auto = autotune_mode(spec) == "Auto"
    overrides = {
        key: value
        for key, value in state.overrides.items()
        if auto and _allowed(spec, key, value, settings)
    }
    pending = state.pending if auto else None
    if pending is not None:
        in_force = overrides.get(pending.field, spec_budget(spec, pending.field))
        if in_force != pending.to_value:
            pending = None  # the judged value is gone: nothing left to judge or roll back
    # a canary runs only in mode Auto with spec.autotune.canary on; otherwise it is dropped
    # (the reconcile then removes its Deployment)
    canary_on = auto and spec.autotune is not None and spec.autotune.canary
    canary = state.canary if canary_on else None
    scaling = autoscaling_of(spec)
    desired = None
    if scaling is not None:
        desired = spec.replicas if state.desired_replicas is None else state.desired_replicas
    restart_times, holds, capacity = state.restart_times, state.holds, state.capacity
    if now is not None:
        restart_times = tuple(t for t in restart_times if now - t < settings.restart_window)
        holds = tuple(h for h in holds if now < h.until)
        if capacity is not None and now - capacity.at >= settings.capacity_memory:
            capacity = None
    if scaling is None:
        capacity = None  # only replica moves use it
    return replace(
        state,
        overrides=overrides,
        pending=pending,
        desired_replicas=desired,
        scale_down_votes=state.scale_down_votes if scaling is not None else 0,
        restart_times=restart_times,
        holds=holds,
        capacity=capacity,
        canary=canary,
    )
