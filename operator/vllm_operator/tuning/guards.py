"""Rule 0: when the tuner must not read the figures at all, it holds and says why."""

from __future__ import annotations

from dataclasses import replace

from vllm_operator.tuning.inputs import Inputs, autoscaling_of, autotune_mode
from vllm_operator.tuning.model import Decision
from vllm_operator.tuning.outcome import hold
from vllm_operator.tuning.reasons import Reason
from vllm_operator.tuning.scaling import low_load

_QUALITY_REASONS: dict[str, Reason] = {
    "missing": Reason.HOLD_METRICS_MISSING,
    "stale": Reason.HOLD_METRICS_STALE,
    "partial": Reason.HOLD_METRICS_PARTIAL,
    "invalid": Reason.HOLD_METRICS_INVALID,
    "error": Reason.HOLD_METRICS_ERROR,
}


def nothing_to_do(i: Inputs) -> Decision | None:
    """Autotune Off and autoscaling off: no lever to pull (the timer should not even run)."""
    if autotune_mode(i.spec) != "Off" or autoscaling_of(i.spec) is not None:
        return None
    message = "autotune is Off and autoscaling is off: nothing to tune"
    return hold(Reason.HOLD_TUNING_OFF, message, i.snapshot, i.state)


def metrics_unusable(i: Inputs) -> Decision | None:
    snap = i.snapshot
    if not snap.usable and not short_fleet_runs(i):
        reason = _QUALITY_REASONS.get(snap.quality, Reason.HOLD_METRICS_INVALID)
        return hold(reason, snap.problem or f"metrics are {snap.quality}", snap, i.state)
    age = (i.now - snap.observed_at).total_seconds()
    limit = i.settings.staleness_limit.total_seconds()
    if age > limit:
        message = f"metrics were observed {age:.0f}s ago (stale after {limit:.0f}s)"
        return hold(Reason.HOLD_METRICS_STALE, message, snap, i.state)
    return None


def fleet_unsteady(i: Inputs) -> Decision | None:
    """A rollout or unready pods: figures describe a fleet in motion. Without a fleet view
    (the simulator may not give one) the tuner trusts the snapshot's own pod counts.

    A pending change's judgement clock restarts: the fleet was not steady after all.
    """
    fleet = i.snapshot.fleet
    if fleet is None:
        return None
    if fleet.in_rollout:
        reason, message = (
            Reason.HOLD_ROLLOUT,
            f"rollout: {fleet.updated}/{fleet.desired} pods updated",
        )
    elif fleet.ready < fleet.desired:
        if short_fleet_runs(i):
            return None
        reason, message = Reason.HOLD_PODS_NOT_READY, f"{fleet.ready}/{fleet.desired} pods ready"
    else:
        return None
    state, pending = i.state, i.state.pending
    if pending is not None and pending.settled_at is not None:
        state = replace(state, pending=replace(pending, settled_at=None))
    return hold(reason, message, i.snapshot, state)


def short_fleet_runs(i: Inputs) -> bool:
    """A fleet short of pods whose figures the rules may still read: idle (short_fleet_idle),
    or short only of pods no node can take (short_fleet_unplaced)."""
    return short_fleet_idle(i) or short_fleet_unplaced(i)


def short_fleet_unplaced(i: Inputs) -> bool:
    """Every pod not ready is one the scheduler cannot place (no free GPU of the type): they
    will not come by waiting, so holding for them would freeze the service at any load. With
    every ready pod measured the rules run on the ready pods' figures, the replica lever capped
    where they stand (scaling.py, AtMaxReplicas' twin NoFreeGPU), so a budget move may act
    (retune_move.py) and a change waiting to be judged is judged."""
    fleet = i.snapshot.fleet
    if fleet is None or not i.unplaced or fleet.ready < 1:
        return False
    if fleet.ready + i.unplaced < fleet.desired:
        return False  # some pod is loading or failing: that is a reason to hold
    return ready_pods_measured(i)


def short_fleet_idle(i: Inputs) -> bool:
    """Pods that never became ready (no node fits them, a crash loop) must not hold a scale-down
    that would free them: with the rollout done, every ready pod measured, no change waiting to
    be judged and the load low, the rules run on the ready pods' figures. Low load means quiet
    figures, so of the rules only the scale-down (rule 9) can act; the rest hold as before.
    """
    fleet = i.snapshot.fleet
    if fleet is None or fleet.in_rollout:
        return False
    if not 1 <= fleet.ready < fleet.desired or i.state.pending is not None:
        return False
    return ready_pods_measured(i) and low_load(i)


def ready_pods_measured(i: Inputs) -> bool:
    """Every ready pod reported figures the rules can read (a partial snapshot lacks only the
    pods that are not ready)."""
    fleet, snap = i.snapshot.fleet, i.snapshot
    if fleet is None:
        return False
    return snap.quality in ("ok", "partial") and snap.pods_scraped >= fleet.ready
