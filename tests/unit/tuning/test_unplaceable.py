"""Pods that never become ready (no node fits them) must not hold the scale-down that frees them.

Four replicas wanted, two placed: the two Pending pods have no series, so the snapshot is partial
(2 of 4 expected pods scraped) and the fleet is short (2/4 ready). Before the fix the tuner held
HoldMetricsPartial / HoldPodsNotReady for good, also when the two serving pods were idle.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from tests.unit.tuning.support import T0, brief, snap, state
from tests.unit.tuning.support import spec as base_spec
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.forecast import pods_coming
from vllm_operator.tuning.inputs import Inputs
from vllm_operator.tuning.model import FleetView, PendingRetune
from vllm_operator.tuning.settings import TuningSettings

LOW = {"running": 4.8, "waiting": 0.0, "ttft_p95": 0.3, "itl_p95": 0.02, "kv_usage": 0.4}
BUSY = {"running": 12.0, "waiting": 0.0}


def short(ready: int = 2, scraped: int = 2, desired: int = 4, **changes: Any) -> Any:
    quality = "ok" if scraped >= desired else "partial"
    fleet = FleetView(desired=desired, ready=ready, updated=desired, rolling=False)
    return snap(
        quality=quality, pods_expected=desired, pods_scraped=scraped, fleet=fleet, **changes
    )


@pytest.mark.parametrize(
    ("snapshot", "expected"),
    [
        (short(**LOW), ("ScaleReplicas", "ScaleDownLowLoad", "replicas", 4, 3)),
        # busy: the short fleet is no reason to act; the hold stays, named as before
        (short(**BUSY), ("Hold", "HoldMetricsPartial", None, None, None)),
        (short(scraped=4, **BUSY), ("Hold", "HoldPodsNotReady", None, None, None)),
        # a ready pod unmeasured: its figures are missing, not low
        (short(scraped=1, **LOW), ("Hold", "HoldMetricsPartial", None, None, None)),
        # no pod ready at all: nothing to read
        (short(ready=0, scraped=0, **LOW), ("Hold", "HoldMetricsPartial", None, None, None)),
        # a rollout is still a rollout
        (
            snap(fleet=FleetView(4, 2, 3, rolling=True), pods_scraped=2, **LOW),
            ("Hold", "HoldRollout", None, None, None),
        ),
    ],
)
def test_short_fleet(snapshot: Any, expected: tuple[Any, ...]) -> None:
    before = state(desired_replicas=4, scale_down_votes=2)
    assert brief(decide(base_spec(), snapshot, before, T0)) == expected


def test_votes_count_on_a_short_fleet() -> None:
    decision = decide(base_spec(), short(**LOW), state(desired_replicas=4), T0)
    assert (brief(decision)[1], decision.state.scale_down_votes) == ("ScaleDownVoting", 1)


def test_a_pending_change_still_holds() -> None:
    pending = PendingRetune("maxActiveSeqs", 8, 6, T0 - timedelta(minutes=1), {})
    before = state(
        desired_replicas=4, scale_down_votes=2, pending=pending, overrides={"maxActiveSeqs": 6}
    )
    assert decide(base_spec(), short(**LOW), before, T0).reason == "HoldMetricsPartial"


def test_the_fleet_shrinks_to_what_fits_and_then_is_steady() -> None:
    """Only 2 pods ever fit: passes one stabilisation apart scale down until all pods are ready,
    and from there the ordinary rules decide (no HoldPodsNotReady, no scale up)."""
    settings = TuningSettings()
    step = settings.scale_down_stabilization
    current, now, reasons = state(desired_replicas=4), T0, []
    for _ in range(12):
        desired = current.desired_replicas or 4
        ready = min(desired, 2)
        figures = short(ready, ready, desired, observed_at=now, **LOW)
        decision = decide(base_spec(), figures, current, now, settings)
        reasons.append(decision.reason)
        current, now = decision.state, now + step
    assert current.desired_replicas is not None and current.desired_replicas <= 2
    assert "HoldPodsNotReady" not in reasons and "HoldMetricsPartial" not in reasons
    assert not any(r.startswith("ScaleUp") for r in reasons)


# Pods the scheduler reports Unschedulable (no free GPU of the type) will not come by waiting:
# the rules run on the ready pods' figures, with the replica lever capped where they stand.
ROOMY = {"autoscaling": {"maxReplicas": 8}}  # maxReplicas is not what caps here
REFUSING = {"running": 16.0, "waiting": 30.0, "rejection_ratio": 0.05, "rejection_rate": 0.5}


def unplaced(n: int, **figures: Any) -> Any:
    """4 asked for, 2 ready and scraped, `n` of the other 2 Unschedulable."""
    s = short(**figures)
    assert s.fleet is not None
    return replace(s, fleet=replace(s.fleet, unschedulable=n))


@pytest.mark.parametrize(
    ("patch", "snapshot", "expected"),
    [
        # busy and in SLO: no reason to hold any more
        (ROOMY, unplaced(2, **BUSY), ("Hold", "WithinSLO", None, None, None)),
        # a problem the replicas cannot fix: the hold names the cluster, not the pods' start
        (
            {**ROOMY, "autotune": {"mode": "Off"}},
            unplaced(2, **REFUSING),
            ("Hold", "NoFreeGPU", None, None, None),
        ),
        (
            {**ROOMY, "autotune": {"mode": "Off"}},
            unplaced(2, running=12.0, waiting=0.0, itl_p95=0.09),
            ("Hold", "NoFreeGPU", None, None, None),
        ),
        # with Auto the budget lever acts where the replica lever cannot
        (
            ROOMY,
            unplaced(2, **REFUSING),
            ("SetBudget", "RaiseQueueRejections", "maxRequests", 32, 64),
        ),
        # one of the two is still loading (or failing): hold for it as before
        (ROOMY, unplaced(1, **REFUSING), ("Hold", "HoldMetricsPartial", None, None, None)),
        (ROOMY, unplaced(0, **REFUSING), ("Hold", "HoldMetricsPartial", None, None, None)),
        # low load still scales down (the Pending pod goes first, the ReplicaSet's own order)
        (ROOMY, unplaced(2, **LOW), ("ScaleReplicas", "ScaleDownLowLoad", "replicas", 4, 3)),
        # at maxReplicas as well: the budget lever acts the same
        ({}, unplaced(2, **REFUSING), ("SetBudget", "RaiseQueueRejections", "maxRequests", 32, 64)),
    ],
)
def test_unschedulable_pods(patch: dict[str, Any], snapshot: Any, expected: Any) -> None:
    before = state(desired_replicas=4, scale_down_votes=2)
    assert brief(decide(base_spec(**patch), snapshot, before, T0)) == expected


def test_the_hold_names_the_gpu_type() -> None:
    decision = decide(
        base_spec(**ROOMY, autotune={"mode": "Off"}),
        unplaced(2, **REFUSING),
        state(desired_replicas=4),
        T0,
    )
    assert "2 of 4 pods unschedulable: no node has a free H100-80GB GPU" in decision.message


def test_a_change_waiting_to_be_judged_is_judged() -> None:
    """A retune rolled while pods were Pending: the judgement does not wait for GPUs that do not
    come (it would restart its clock on every pass)."""
    pending = PendingRetune("maxActiveSeqs", 8, 6, T0 - timedelta(minutes=1), {})
    before = state(desired_replicas=4, pending=pending, overrides={"maxActiveSeqs": 6})
    decision = decide(base_spec(**ROOMY), unplaced(2, **BUSY), before, T0)
    assert not decision.reason.startswith("Hold")
    assert decision.state.pending is not None and decision.state.pending.settled_at is not None


def test_unschedulable_pods_are_not_coming() -> None:
    """The forecast counts asked-for pods as coming; a Pending pod no node fits is not."""
    fleet = FleetView(desired=4, ready=2, updated=4, rolling=False, unschedulable=2)
    i = Inputs(base_spec(**ROOMY), snap(fleet=fleet), state(desired_replicas=4, last_scale_at=T0),
               T0, TuningSettings(), True)  # fmt: skip
    assert pods_coming(i) == 0
    assert pods_coming(replace(i, snapshot=snap(fleet=replace(fleet, unschedulable=1)))) == 1
