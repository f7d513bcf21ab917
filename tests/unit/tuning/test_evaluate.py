"""Rule 1: a budget change is judged on fresh figures, then kept or rolled back and held."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from tests.unit.tuning.support import T0, brief, seen, snap, spec, state
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.model import FleetView, Hold, PendingRetune, TuningState

APPLIED = T0 - timedelta(minutes=10)
SETTLED = T0 - timedelta(minutes=5)
BEFORE = {"rejection_ratio": 0.05, "ttft_p95": 0.3, "itl_p95": 0.035, "request_rate": 10.0}
RAISED_QUEUE = PendingRetune("maxRequests", 32, 64, APPLIED, BEFORE, SETTLED)
KEPT = ("Hold", "RetuneKept", None, None, None)
ROLLBACK = ("Rollback", "RollbackWorse", "maxRequests", 64, 32)


def judged(pending: PendingRetune = RAISED_QUEUE, **changes: Any) -> TuningState:
    base: dict[str, Any] = {
        "overrides": {pending.field: pending.to_value},
        "pending": pending,
        "restart_times": (APPLIED,),
        "retune_cooldown_until": APPLIED + timedelta(seconds=900),
    }
    return state(**{**base, **changes})


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        ({"rejection_ratio": 0.02, "ttft_p95": 0.35}, KEPT),
        ({"rejection_ratio": 0.05}, KEPT),  # did not help: kept, rule 3 may go on later
        # Targeted figure: over its budget and worse than before by more than 10%.
        ({"rejection_ratio": 0.0551}, ROLLBACK),
        ({"rejection_ratio": 0.055}, KEPT),
        # Guarded figure: within its SLO before, over it by more than 10% now.
        ({"rejection_ratio": 0.0, "ttft_p95": 0.551}, ROLLBACK),
        ({"rejection_ratio": 0.0, "ttft_p95": 0.55}, KEPT),
        # Too little traffic to compare: kept (no figure says worse).
        ({"request_rate": 0.01, "rejection_ratio": 0.9}, KEPT),
    ],
)
def test_queue_raise_judgement(after: dict[str, Any], expected: tuple[Any, ...]) -> None:
    assert brief(decide(spec(), snap(**after), judged(), T0)) == expected


def test_kept_change_clears_pending_and_reports_before_and_after() -> None:
    decision = decide(spec(), snap(rejection_ratio=0.002), judged(), T0)
    assert decision.state == replace(judged(), pending=None, arrivals=seen())
    assert decision.message == (
        "queue.maxRequests 32 -> 64 kept: rejection_ratio 5.0% -> 0.2%, ttft_p95 0.30s -> 0.30s"
    )


def test_rollback_restores_counts_a_restart_and_holds_the_direction() -> None:
    decision = decide(spec(), snap(rejection_ratio=0.08), judged(), T0)
    assert decision.state == state(
        overrides={},  # 32 is the spec value
        pending=None,
        restart_times=(APPLIED, T0),
        retune_cooldown_until=T0 + timedelta(seconds=900),
        holds=(Hold("maxRequests", "up", T0 + timedelta(seconds=1800)),),
        arrivals=seen(),
        problem_since=T0,  # the 503s the pass saw
    )
    assert decision.message == (
        "queue.maxRequests 32 -> 64 made rejection_ratio 5.0% -> 8.0%: "
        "rolled back, no move up for 1800s"
    )


def test_the_hold_blocks_the_same_direction_until_it_ends() -> None:
    manual = spec(autoscaling=None, autotune={"maxRestartsPerHour": 3})
    rolled = decide(manual, snap(rejection_ratio=0.08), judged(), T0).state
    rejecting = snap(rejection_ratio=0.05, rejection_rate=0.5)
    decisions = []
    for later in (timedelta(seconds=1000), timedelta(seconds=1800)):  # cooldown over; hold over
        now = T0 + later
        decisions.append(brief(decide(manual, replace(rejecting, observed_at=now), rolled, now)))
    assert decisions == [
        ("Hold", "HoldAfterRollback", None, None, None),
        ("SetBudget", "RaiseQueueRejections", "maxRequests", 32, 64),
    ]


def test_a_rollback_is_not_held_by_the_restart_budget() -> None:
    # Both restarts of the hour are spent (the change itself and one more): the harmful change
    # is undone anyway, and the rollback counts, so forward changes wait for the budget.
    full = judged(restart_times=(APPLIED, T0 - timedelta(minutes=1)))
    decision = decide(spec(), snap(rejection_ratio=0.08), full, T0)
    assert brief(decision) == ROLLBACK
    assert decision.state.restart_times == (APPLIED, T0 - timedelta(minutes=1), T0)


@pytest.mark.parametrize(
    ("rate", "expected"),
    [
        (12.5, ROLLBACK),  # +25%: within the tolerance, the change is to blame
        (12.6, KEPT),  # +26%: traffic, not the change, may have made it worse
        (8.0, ROLLBACK),  # traffic fell: worse all the same
    ],
)
def test_a_figure_worse_under_rising_traffic_does_not_roll_back(
    rate: float | None, expected: tuple[Any, ...]
) -> None:
    decision = decide(spec(), snap(rejection_ratio=0.08, request_rate=rate), judged(), T0)
    assert brief(decision) == expected
    if expected == KEPT:
        assert decision.state.pending is None
        assert decision.message == (
            "queue.maxRequests 32 -> 64 kept: rejection_ratio 5.0% -> 8.0%, but traffic rose 26% "
            "(10 -> 12.6 req/s), so the change is not to blame"
        )


SETTLING = replace(RAISED_QUEUE, settled_at=T0 - timedelta(seconds=60))


def test_replicas_may_grow_while_a_change_settles() -> None:
    # 503s over budget with TTFT at its SLO: rule 2 scales up, and the judgement stays pending.
    overloaded = snap(rejection_ratio=0.2, rejection_rate=2.0, ttft_p95=0.6)
    decision = decide(spec(), overloaded, judged(SETTLING), T0)
    assert brief(decision) == ("ScaleReplicas", "ScaleUpRejections", "replicas", 2, 3)
    assert decision.state.pending == SETTLING
    assert decision.message.endswith("(queue.maxRequests 32 -> 64 is judged in 120s)")


@pytest.mark.parametrize(
    ("after", "autoscaling"),
    [
        ({"rejection_ratio": 0.2, "rejection_rate": 2.0, "ttft_p95": 0.6}, None),  # no replicas
        ({"itl_p95": 0.01, "running": 16.0, "waiting": 10.0}, {}),  # rule 5, an opportunity
        ({"running": 1.0, "ttft_p95": 0.1, "itl_p95": 0.01}, {}),  # low load: no scale-down
    ],
)
def test_nothing_else_moves_while_a_change_settles(
    after: dict[str, Any], autoscaling: dict[str, Any] | None
) -> None:
    ready_to_scale_down = judged(SETTLING, scale_down_votes=2)
    decision = decide(spec(autoscaling=autoscaling), snap(**after), ready_to_scale_down, T0)
    assert brief(decision) == ("Hold", "RetuneSettling", None, None, None)
    assert decision.state.pending == SETTLING


LOWERED = PendingRetune(
    "maxActiveSeqs",
    8,
    4,
    APPLIED,
    {"itl_p95": 0.07, "ttft_p95": 0.3, "rejection_ratio": 0.0},
    SETTLED,
)


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        ({"itl_p95": 0.04, "ttft_p95": 0.45}, KEPT),
        ({"itl_p95": 0.078}, ("Rollback", "RollbackWorse", "maxActiveSeqs", 4, 8)),
        ({"itl_p95": 0.04, "ttft_p95": 0.6}, ("Rollback", "RollbackWorse", "maxActiveSeqs", 4, 8)),
        (
            {"itl_p95": 0.04, "rejection_ratio": 0.02},
            ("Rollback", "RollbackWorse", "maxActiveSeqs", 4, 8),
        ),
    ],
)
def test_active_seqs_judgement(after: dict[str, Any], expected: tuple[Any, ...]) -> None:
    assert brief(decide(spec(), snap(**after), judged(LOWERED), T0)) == expected


@pytest.mark.parametrize(
    ("settled", "window", "reason"),
    [
        (T0 - timedelta(seconds=179), 120.0, "RetuneSettling"),  # 180 s of fresh figures needed
        (T0 - timedelta(seconds=180), 120.0, "RetuneKept"),
        (T0 - timedelta(seconds=299), 300.0, "RetuneSettling"),  # ... or a whole window
        (T0 - timedelta(seconds=300), 300.0, "RetuneKept"),
    ],
)
def test_judgement_waits_for_fresh_figures(settled: Any, window: float, reason: str) -> None:
    pending = replace(RAISED_QUEUE, settled_at=settled)
    decision = decide(spec(), snap(window_seconds=window), judged(pending), T0)
    assert decision.reason == reason


def test_first_steady_pass_starts_the_clock() -> None:
    pending = replace(RAISED_QUEUE, settled_at=None)
    decision = decide(spec(), snap(), judged(pending), T0)
    assert (decision.reason, decision.state.pending) == (
        "RetuneSettling",
        replace(pending, settled_at=T0),
    )


def test_a_rollout_restarts_the_clock() -> None:
    rolling = snap(fleet=FleetView(2, 1, 1, rolling=True))
    decision = decide(spec(), rolling, judged(), T0)
    assert (decision.reason, decision.state.pending) == (
        "HoldRollout",
        replace(RAISED_QUEUE, settled_at=None),
    )


@pytest.mark.parametrize("mode", ["Off", "Recommend"])
def test_leaving_auto_forgets_the_pending_change(mode: str) -> None:
    decision = decide(spec(autotune={"mode": mode}), snap(), judged(), T0)
    assert (decision.reason, decision.state.pending, decision.state.overrides) == (
        "WithinSLO",
        None,
        {},
    )
