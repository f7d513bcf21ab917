"""Replica moves: the fast lever. Only with spec.autoscaling.enabled, always within min/max.

Up: +max(1, floor(50%)) after scale_up_cooldown. Down: with a trusted capacity (tuning/capacity.py)
straight to what the long window's arrivals need at headroom x it, when that is more than one
step; otherwise -max(1, floor(25%)) (dask); either only after scale_down_votes consecutive
low-load passes and scale_down_stabilization since the last change. Low load is judged for the
fleet *after* the move (in-flight requests per pod, KV usage, ITL, and arrivals per pod against
the capacity), so a scale down never lands the service at the edge where a scale up would fire
again; a deep move that fails a check falls back to the one step.

Capacity: a scale-up for a missed SLO records the per-pod arrival rate at which the fleet missed
it, when the window saw one fleet size (for a first capacity: when it began after the pods of
the last change were Ready) and one set of budgets (none pending a judgement). That is what a
pod serves, learned on this model, GPU, traffic mix and budgets, with every nonlinearity
included (ITL grows with the batch, the batch with ITL). Arrivals near it (headroom x
capacity) with latency no longer quiet scale up before the SLO is missed, which is the lead a
pod that loads for minutes needs; a scale down must leave each pod under it.
"""

from __future__ import annotations

import math
from dataclasses import replace

from vllm_operator.api.budgets import budget_change
from vllm_operator.tuning import signals
from vllm_operator.tuning.capacity import down_capacity, trusted_capacity
from vllm_operator.tuning.forecast import forecast, ready_horizon, under_rate
from vllm_operator.tuning.inputs import Inputs
from vllm_operator.tuning.model import Action, Capacity, Decision, PendingRetune
from vllm_operator.tuning.outcome import Blocked, Move, act
from vllm_operator.tuning.reasons import Reason

_OFF = Blocked(Reason.AUTOSCALING_OFF, "autoscaling is off", disabled=True)


def _since_last_scale(i: Inputs) -> float | None:
    last = i.state.last_scale_at
    return None if last is None else (i.now - last).total_seconds()


def _move(i: Inputs, target: int) -> Move:
    state = replace(
        i.state,
        desired_replicas=target,
        last_scale_at=i.now,
        last_scale_from=i.replicas,
        scale_down_votes=0,
    )
    action = Action("ScaleReplicas", "replicas", i.replicas, target)
    return Move(action, state, f"replicas {i.replicas} -> {target}")


def rate_per_pod(i: Inputs) -> float | None:
    rate = i.snapshot.request_rate
    return rate / i.pods if rate is not None and i.rates_trusted else None


def _up_blocker(i: Inputs) -> tuple[int, Blocked | None]:
    """maxReplicas in force, and what stops a scale-up now (None when nothing does)."""
    scaling = i.scaling
    if scaling is None:
        return i.replicas, _OFF
    top = scaling.max_replicas if scaling.max_replicas is not None else i.replicas
    if i.replicas >= top:
        return top, Blocked(Reason.AT_MAX_REPLICAS, f"replicas at maxReplicas {top}")
    if i.unplaced:  # another pod would wait beside them
        return i.replicas, Blocked(Reason.NO_FREE_GPU, i.unplaced_phrase())
    since, cooldown = _since_last_scale(i), i.settings.scale_up_cooldown.total_seconds()
    if since is not None and since < cooldown:
        return top, Blocked(
            Reason.SCALE_UP_COOLDOWN,
            f"replicas changed {since:.0f}s ago (cooldown {cooldown:.0f}s)",
        )
    return top, None


def scale_up(i: Inputs, *, missed_slo: bool = True) -> Move | Blocked:
    """One step up. `missed_slo`: the fleet missed its SLO at this load, which teaches capacity,
    unless the miss predates the budgets in force on every pod (new_budgets_suffice: then it
    holds where they serve the forecast, and teaches nothing either way)."""
    top, blocked = _up_blocker(i)
    if blocked is None and missed_slo:
        blocked = new_budgets_suffice(i)
    if blocked is not None:
        return blocked
    step = max(1, math.floor(i.replicas * i.settings.scale_up_fraction))
    move = _move(i, min(top, i.replicas + step))
    per_pod = rate_per_pod(i)
    if not missed_slo or per_pod is None or _budgets_settling(i) is not None:
        return move  # a miss in a window that mixes budgets teaches nothing of the ones in force
    since = _since_last_scale(i)
    if i.state.capacity is not None and not _one_fleet_size(i, since):
        return move  # a window that may mix fleet sizes reads low: keep what a clean one taught
    if i.state.capacity is None and not _after_pods_ready(i, since):
        # Its arrivals, served mostly by the fleet before the change, divided by the pods after
        # it, read low; learned anyway, that figure would size the fleet for an hour.
        return move
    return replace(move, state=replace(move.state, capacity=Capacity(per_pod, i.now)))


def new_pods_suffice(i: Inputs) -> Blocked | None:
    """The blocker of a scale-up for latency measured partly before the pods of the last
    scale-up were Ready, where the trusted capacity says the fleet now serves the forecast with
    the room a scale down leaves (`headroom`, not rule 8's `forecast_headroom`: a fleet that
    only just fits may be missing for itself, and that miss is acted on).

    The metrics window still holds the minutes the smaller fleet served, so its p95 is over the
    SLO for up to a window after the new pods took their share. Another pod, Ready minutes from
    now, would answer a miss the window will have forgotten by then, and stay until a scale down
    (docs/tuning.md, "A miss older than the new pods"). After a scale down the miss is the
    smaller fleet's, now: no blocker then.
    """
    since, before = _since_last_scale(i), i.state.last_scale_from
    if since is None or before is None or before >= i.replicas or _after_pods_ready(i, since):
        return None
    serving = _fleet_serves_forecast(i)
    if serving is None:
        return None
    phrase = (
        f"the window began before the pods of replicas {before} -> {i.replicas} ({since:.0f}s ago)"
        f" were Ready, and {serving}"
    )
    return Blocked(Reason.NEW_PODS_SUFFICE, phrase)


def new_budgets_suffice(i: Inputs) -> Blocked | None:
    """The blocker of a scale-up for a miss (503s or latency) in a metrics window that still
    holds figures from before the budgets in force reached every pod, where the trusted capacity
    (the engine model's for those budgets: a budget move forgets the observed one) says the
    fleet serves the forecast with the room a scale down leaves.

    A move's rollout takes a pod's load time, and the old pods serve the load meanwhile: on
    `l4-3b-valve8-gpus4/diurnal` (bench/control_loop, seed 9) the valve of 8 that the move
    raised to 32 refused 1.7% of a rising load in the rollout's last minute, and the two scale-ups
    for those 503s, and the capacity learned from them (0.5/s a pod, where the model gives one
    pod 1.25/s at the new valve), took the fleet to seven pods on four GPUs (docs/tuning.md,
    "A miss older than the budgets in force").
    """
    settling = _budgets_settling(i)
    serving = None if settling is None else _fleet_serves_forecast(i)
    if settling is None or serving is None:
        return None
    p, since = settling
    change = budget_change(p.field, p.from_value, p.to_value)
    phrase = f"the window began before {change} was on every pod ({since:.0f}s ago), and {serving}"
    return Blocked(Reason.NEW_BUDGETS_SUFFICE, phrase)


def _budgets_settling(i: Inputs) -> tuple[PendingRetune, float] | None:
    """The pending budget change and the seconds since it was first seen on every pod (0 while
    it rolls out), while the snapshot window still holds figures from before it; None when no
    change is pending or the window holds only the budgets in force."""
    p = i.state.pending
    if p is None:
        return None
    since = 0.0 if p.settled_at is None else (i.now - p.settled_at).total_seconds()
    return (p, since) if since < i.snapshot.window_seconds else None


def _fleet_serves_forecast(i: Inputs) -> str | None:
    """How the replicas now serve the larger of the present arrivals and the forecast under
    `headroom` x the trusted capacity each, as a phrase; None when they do not, or when nothing
    says (no capacity, no forecast, too few arrivals to trust)."""
    known, ahead = trusted_capacity(i), forecast(i)
    if known is None or ahead is None or not i.rates_trusted:
        return None
    rate = max(ahead.rate, ahead.now_rate)
    if pods_for(i, rate, known.per_pod) > i.replicas:
        return None
    return (
        f"{i.replicas} serve {rate:.2f}/s (the forecast) under "
        f"{i.settings.headroom:.0%} of capacity {known.per_pod:.2f}/s ({known.source}) each"
    )


def scale_up_to(i: Inputs, target: int) -> Move | Blocked:
    """Straight to `target` (within maxReplicas): the forecast knows how many pods it needs."""
    top, blocked = _up_blocker(i)
    if blocked is not None:
        return blocked
    return _move(i, min(top, max(target, i.replicas + 1)))


def _after_pods_ready(i: Inputs, since_scale: float | None) -> bool:
    """The snapshot window began after the pods of the last replica change were Ready (the pod
    ready time, learned or default): the narrower test, for a first capacity, where a reading
    that only may be mixed is still the best there is."""
    if since_scale is None:
        return True
    return since_scale >= ready_horizon(i)[0] + i.snapshot.window_seconds


def _one_fleet_size(i: Inputs, since_scale: float | None) -> bool:
    """The snapshot window saw one fleet size: the last replica change and the pods it started
    are older than the window."""
    settle = i.snapshot.window_seconds + i.settings.pod_ready_allowance.total_seconds()
    return since_scale is None or since_scale >= settle


def raised_capacity(i: Inputs) -> Capacity | None:
    """The learned capacity, raised when the pods serve more than it with headroom to spare.

    A capacity learned on a heavier traffic mix would otherwise keep the fleet too big for good.
    """
    known, per_pod = i.state.capacity, rate_per_pod(i)
    if known is None or per_pod is None or per_pod <= known.per_pod:
        return known
    roomy = signals.headroom(i, "ttft") and signals.headroom(i, "itl")
    if not roomy or not signals.rejections_quiet(i):
        return known
    return Capacity(per_pod, i.now)


def near_capacity(i: Inputs) -> bool:
    """Arrivals per pod at headroom x the learned capacity, and latency or 503s no longer quiet.

    The second half keeps a capacity learned on a heavier mix from adding pods the figures do
    not ask for (raised_capacity then corrects it). A forecast from the last period's shape
    knows whether the load goes on rising, which this rule only guesses: rule 8 then decides
    alone (at a burst's plateau this rule would add a pod that is ready when the burst ends).
    """
    ahead = forecast(i)
    if ahead is not None and ahead.past_period_rate is not None:
        return False
    known, per_pod = trusted_capacity(i), rate_per_pod(i)
    if known is None or per_pod is None or per_pod < i.settings.headroom * known.per_pod:
        return False
    return not signals.all_quiet(i)


def scale_down_target(i: Inputs) -> int:
    """One step down: -max(1, floor(scale_down_fraction x replicas)), within minReplicas."""
    floor_ = i.scaling.min_replicas if i.scaling is not None else i.replicas
    step = max(1, math.floor(i.replicas * i.settings.scale_down_fraction))
    return max(floor_, min(i.replicas, i.replicas - step))


def sized_target(i: Inputs) -> int | None:
    """The replicas the scale-down's capacity (down_capacity) says the long window's arrivals
    need, at headroom x it, within minReplicas; None without a capacity or a rate."""
    known, rate = down_capacity(i), under_rate(i, forecast(i))
    if known is None or rate is None or i.scaling is None:
        return None
    return pods_for(i, rate, known.per_pod)


def forecast_pods(i: Inputs, rate: float, per_pod: float) -> int:
    """The pods that serve `rate` req/s at forecast_headroom x `per_pod` each: what rule 8 adds
    ahead of a rising load, and what a pod-by-pod rollout must leave serving (rollout_room.py)."""
    return math.ceil(rate / (i.settings.forecast_headroom * per_pod) - 1e-9)


def pods_for(i: Inputs, rate: float, per_pod: float) -> int:
    """The pods that serve `rate` req/s each under headroom x `per_pod`, within minReplicas."""
    need = math.floor(rate / (i.settings.headroom * per_pod)) + 1  # strictly under it
    return max(i.scaling.min_replicas if i.scaling is not None else 1, need)


def down_target(i: Inputs) -> int | None:
    """Where a scale down may go now: what the capacity says the load needs when that is below
    one step and every check passes there, else one step; None when the load is not low."""
    step = scale_down_target(i)
    sized = sized_target(i)
    for target in (sized, step) if sized is not None and sized < step else (step,):
        if _low_load_at(i, target):
            return target
    return None


def low_load(i: Inputs) -> bool:
    """Quiet figures, and the load would still fit well after a scale-down (down_target)."""
    return down_target(i) is not None


def _low_load_at(i: Inputs, target: int) -> bool:
    """Quiet figures, and the load would still fit well on `target` replicas."""
    snap = i.snapshot
    if i.scaling is None or snap.running is None or snap.waiting is None:
        return False
    # With a capacity the arrivals judge the step below, and latency needs only headroom:
    # a floor above well_under x SLO (long prompts) would otherwise forbid any scale down.
    known = down_capacity(i)
    share = i.settings.headroom if known is not None else i.settings.well_under
    if not signals.all_quiet(i, share) or signals.requests_wait(i) or signals.preempting(i):
        return False
    after = max(1, target)
    cap = i.active_cap
    if cap is not None and (snap.running + snap.waiting) / after > i.settings.well_under * cap:
        return False
    if not signals.itl_fits_after(i, i.replicas / after):
        return False
    # the long window: the peak of the last under_window and the forecast must fit too. An
    # unmeasured arrival rate (a fresh pod's counters need two scrapes in the window) frees no
    # replica: quiet gauges alone cannot tell a lull from load the pods have not reported yet.
    rate = under_rate(i, forecast(i))
    if rate is None:
        return False
    limit = None if known is None else i.settings.headroom * known.per_pod
    if limit is not None and rate / after >= limit:
        return False
    # Unmeasured KV usage is no headroom, as for rule 3: a missing series never frees a replica.
    kv = snap.kv_usage
    return kv is not None and kv * i.replicas / after <= i.settings.kv_headroom


def scale_down(i: Inputs) -> Move | Blocked:
    if i.scaling is None:
        return _OFF
    found = down_target(i)
    target = scale_down_target(i) if found is None else found
    if target >= i.replicas:
        return Blocked(Reason.AT_MIN_REPLICAS, f"replicas at minReplicas {i.scaling.min_replicas}")
    votes, needed = i.state.scale_down_votes, i.settings.scale_down_votes
    if votes < needed:
        return Blocked(Reason.SCALE_DOWN_VOTING, f"low load for {votes} of {needed} passes")
    since, wait = _since_last_scale(i), i.settings.scale_down_stabilization.total_seconds()
    if since is not None and since < wait:
        return Blocked(
            Reason.SCALE_DOWN_STABILIZING,
            f"replicas changed {since:.0f}s ago (stabilization {wait:.0f}s)",
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
    return act(Reason.REPLICAS_OUT_OF_BOUNDS, diagnosis, _move(i, target), i.snapshot)
