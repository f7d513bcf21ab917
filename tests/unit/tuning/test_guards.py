"""Rule 0: guards hold before any figure is read, in their documented order."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.unit.tuning.support import T0, brief, snap, spec, state
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.model import FleetView

HOLD = "Hold"
OFF = {"autotune": {"mode": "Off"}}
NO_SCALING = {"autoscaling": None}
REJECTING = {"rejection_ratio": 0.2, "rejection_rate": 2.0}


@pytest.mark.parametrize(
    ("spec_patch", "snap_changes", "expected"),
    [
        ({**OFF, **NO_SCALING}, {}, (HOLD, "HoldTuningOff", None, None, None)),
        ({**OFF, **NO_SCALING}, {"quality": "missing"}, (HOLD, "HoldTuningOff", None, None, None)),
        (OFF, {}, (HOLD, "WithinSLO", None, None, None)),
        (
            {"autotune": {"mode": "Recommend"}, **NO_SCALING},
            {},
            (HOLD, "WithinSLO", None, None, None),
        ),
        ({}, {"quality": "missing"}, (HOLD, "HoldMetricsMissing", None, None, None)),
        ({}, {"quality": "stale"}, (HOLD, "HoldMetricsStale", None, None, None)),
        ({}, {"quality": "partial"}, (HOLD, "HoldMetricsPartial", None, None, None)),
        ({}, {"quality": "invalid"}, (HOLD, "HoldMetricsInvalid", None, None, None)),
        ({}, {"quality": "error"}, (HOLD, "HoldMetricsError", None, None, None)),
        (
            {},
            {"observed_at": T0 - timedelta(seconds=181)},
            (HOLD, "HoldMetricsStale", None, None, None),
        ),
        ({}, {"observed_at": T0 - timedelta(seconds=180)}, (HOLD, "WithinSLO", None, None, None)),
        (
            {},
            {"fleet": FleetView(2, 2, 2, rolling=True), **REJECTING},
            (HOLD, "HoldRollout", None, None, None),
        ),
        ({}, {"fleet": FleetView(2, 2, 1, rolling=False)}, (HOLD, "HoldRollout", None, None, None)),
        (
            {},
            {"fleet": FleetView(2, 1, 2, rolling=False)},
            (HOLD, "HoldPodsNotReady", None, None, None),
        ),
        ({}, {"fleet": None}, (HOLD, "WithinSLO", None, None, None)),
    ],
)
def test_guards(
    spec_patch: dict[str, Any], snap_changes: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    assert brief(decide(spec(**spec_patch), snap(**snap_changes), state(), T0)) == expected


def test_metrics_hold_quotes_the_snapshot_problem() -> None:
    decision = decide(spec(), snap(quality="partial", problem="1 of 2 pods scraped."), state(), T0)
    assert (decision.reason, decision.message) == ("HoldMetricsPartial", "1 of 2 pods scraped.")


@pytest.mark.parametrize(
    ("desired", "expected"),
    [
        (6, ("ScaleReplicas", "ReplicasOutOfBounds", "replicas", 6, 4)),
        (0, ("ScaleReplicas", "ReplicasOutOfBounds", "replicas", 0, 1)),
        (4, ("Hold", "HoldMetricsMissing", None, None, None)),
    ],
)
def test_replicas_out_of_bounds_move_even_without_metrics(
    desired: int, expected: tuple[Any, ...]
) -> None:
    decision = decide(spec(), snap(quality="missing"), state(desired_replicas=desired), T0)
    assert brief(decision) == expected


def test_a_guard_hold_clears_low_load_votes() -> None:
    decision = decide(spec(), snap(quality="stale"), state(scale_down_votes=2), T0)
    assert decision.state.scale_down_votes == 0


def test_guard_hold_keeps_the_rest_of_the_state() -> None:
    before = state(overrides={"maxRequests": 64}, retune_cooldown_until=T0 + timedelta(minutes=5))
    decision = decide(spec(), snap(quality="missing"), before, T0)
    assert decision.state == before
