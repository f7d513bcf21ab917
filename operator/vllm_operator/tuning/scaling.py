"""Replica moves: the fast lever. Only with spec.autoscaling.enabled, always within min/max.

Up: +max(1, floor(50%)) after scale_up_cooldown. Down: -max(1, floor(25%)) (dask), only after
scale_down_votes consecutive low-load passes and scale_down_stabilization since the last change.
Low load is judged for the fleet *after* the step, so a scale down never lands the service at the
edge where a scale up would fire again.
"""

from __future__ import annotations

import math
from dataclasses import replace

from vllm_operator.tuning import signals
from vllm_operator.tuning.inputs import Inputs
from vllm_operator.tuning.model import Action, Decision
from vllm_operator.tuning.outcome import Blocked, Move, act

_OFF = Blocked("AutoscalingOff", "autoscaling is off", disabled=True)


def _since_last_scale(i: Inputs) -> float | None:
    last = i.state.last_scale_at
    return None if last is None else (i.now - last).total_seconds()


def _move(i: Inputs, target: int) -> Move:
    state = replace(i.state, desired_replicas=target, last_scale_at=i.now, scale_down_votes=0)
    action = Action("ScaleReplicas", "replicas", i.replicas, target)
    return Move(action, state, f"replicas {i.replicas} -> {target}")


def scale_up(i: Inputs) -> Move | Blocked:
    scaling = i.scaling
    if scaling is None:
        return _OFF
    top = scaling.max_replicas if scaling.max_replicas is not None else i.replicas
    if i.replicas >= top:
        return Blocked("AtMaxReplicas", f"replicas at maxReplicas {top}")
    since, cooldown = _since_last_scale(i), i.settings.scale_up_cooldown.total_seconds()
    if since is not None and since < cooldown:
        return Blocked(
            "ScaleUpCooldown", f"replicas changed {since:.0f}s ago (cooldown {cooldown:.0f}s)"
        )
    step = max(1, math.floor(i.replicas * i.settings.scale_up_fraction))
    return _move(i, min(top, i.replicas + step))


def scale_down_target(i: Inputs) -> int:
    floor_ = i.scaling.min_replicas if i.scaling is not None else i.replicas
    step = max(1, math.floor(i.replicas * i.settings.scale_down_fraction))
    return max(floor_, min(i.replicas, i.replicas - step))


def low_load(i: Inputs) -> bool:
    """Quiet figures, and the load would still fit well after one scale-down step."""
    snap = i.snapshot
    if i.scaling is None or snap.running is None or snap.waiting is None:
        return False
    quiet = signals.rejections_quiet(i) and signals.quiet(i, "ttft") and signals.quiet(i, "itl")
    if not quiet or signals.requests_wait(i) or signals.preempting(i):
        return False
    after = max(1, scale_down_target(i))
    cap = i.active_cap
    if cap is not None and (snap.running + snap.waiting) / after > i.settings.well_under * cap:
        return False
    kv = snap.kv_usage
    return kv is None or kv * i.replicas / after <= i.settings.kv_headroom


def scale_down(i: Inputs) -> Move | Blocked:
    if i.scaling is None:
        return _OFF
    target = scale_down_target(i)
    if target >= i.replicas:
        return Blocked("AtMinReplicas", f"replicas at minReplicas {i.scaling.min_replicas}")
    votes, needed = i.state.scale_down_votes, i.settings.scale_down_votes
    if votes < needed:
        return Blocked("ScaleDownVoting", f"low load for {votes} of {needed} passes")
    since, wait = _since_last_scale(i), i.settings.scale_down_stabilization.total_seconds()
    if since is not None and since < wait:
        return Blocked(
            "ScaleDownStabilizing", f"replicas changed {since:.0f}s ago (stabilization {wait:.0f}s)"
        )
    return _move(i, target)


def clamp_replicas(i: Inputs) -> Decision | None:
    """Replicas outside [minReplicas, maxReplicas] (spec changed): move inside at once."""
    scaling = i.scaling
    if scaling is None:
        return None
    top = scaling.max_replicas if scaling.max_replicas is not None else i.replicas
    target = min(max(i.replicas, scaling.min_replicas), top)
    if target == i.replicas:
        return None
    diagnosis = f"replicas {i.replicas} outside [{scaling.min_replicas}, {top}]"
    return act("ReplicasOutOfBounds", diagnosis, _move(i, target), i.snapshot)
