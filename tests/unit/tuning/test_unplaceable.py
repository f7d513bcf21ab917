"""Pods that never become ready (no node fits them) must not hold the scale-down that frees them.

Four replicas wanted, two placed: the two Pending pods have no series, so the snapshot is partial
(2 of 4 expected pods scraped) and the fleet is short (2/4 ready). Before the fix the tuner held
HoldMetricsPartial / HoldPodsNotReady for good, also when the two serving pods were idle.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.unit.tuning.support import T0, brief, snap, state
from tests.unit.tuning.support import spec as base_spec
from vllm_operator.tuning.decide import decide
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
