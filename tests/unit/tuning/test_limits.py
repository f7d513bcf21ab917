"""Budget guardrails: range, max step, retune cooldown, restarts per hour, holds after rollback."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.unit.tuning.support import T0, brief, seen, snap, spec, state
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.limits import allowed_range
from vllm_operator.tuning.model import Hold, PendingRetune
from vllm_operator.tuning.settings import TuningSettings

SETTINGS = TuningSettings()


@pytest.mark.parametrize(
    ("spec_patch", "key", "expected"),
    [
        ({}, "maxRequests", (4, 256)),  # no bounds: [spec / 8, spec x 8]
        (
            {"autotune": {"bounds": {"maxRequests": {"min": 16, "max": 40}}}},
            "maxRequests",
            (16, 40),
        ),
        ({"autotune": {"bounds": {"maxRequests": {"max": 400}}}}, "maxRequests", (4, 400)),
        ({}, "maxActiveSeqs", (1, 16)),  # never above maxSeqs
        ({"budgets": {"running": {"maxActiveSeqs": None}}}, "maxActiveSeqs", (2, 16)),
        ({"autotune": {"bounds": {"maxActiveSeqs": {"min": 17}}}}, "maxActiveSeqs", None),
        ({}, "maxSeqs", None),  # never tuned: it sizes CUDA graphs and the compile cache
        ({"budgets": {"queue": None}}, "maxRequests", None),  # unset: no anchor
        ({}, "maxBatchedTokens", (512, 32768)),
        (
            {"budgets": {"tokens": {"maxBatchedTokens": 32}}},
            "maxBatchedTokens",
            (16, 256),
        ),  # >= maxSeqs
        (
            {
                "engine": {"enableChunkedPrefill": False, "maxModelLen": 8192},
                "budgets": {"tokens": {"maxBatchedTokens": 8192}},
            },
            "maxBatchedTokens",
            (8192, 65536),
        ),
    ],
)
def test_allowed_range(spec_patch: dict[str, Any], key: str, expected: Any) -> None:
    assert allowed_range(spec(**spec_patch), key, SETTINGS) == expected


REJECTING = {"rejection_ratio": 0.05, "rejection_rate": 0.5}
QUEUE = ("SetBudget", "RaiseQueueRejections", "maxRequests", 32, 64)
NO_SCALING = {"autoscaling": None}


def blocked(reason: str) -> tuple[Any, ...]:
    return ("Hold", reason, None, None, None)


@pytest.mark.parametrize(
    ("spec_patch", "changes", "expected"),
    [
        ({}, {"retune_cooldown_until": T0 + timedelta(seconds=1)}, blocked("RetuneCooldown")),
        ({}, {"retune_cooldown_until": T0}, QUEUE),
        # maxRestartsPerHour 2: two restarts inside the hour exhaust it; an hour-old one is gone.
        (
            {},
            {"restart_times": (T0 - timedelta(minutes=59), T0 - timedelta(minutes=30))},
            blocked("RestartBudgetExhausted"),
        ),
        ({}, {"restart_times": (T0 - timedelta(minutes=60), T0 - timedelta(minutes=30))}, QUEUE),
        ({"autotune": {"maxRestartsPerHour": 0}}, {}, blocked("RestartBudgetExhausted")),
        # A hold after a rollback blocks its direction only, until it ends.
        (
            {},
            {"holds": (Hold("maxRequests", "up", T0 + timedelta(seconds=1)),)},
            blocked("HoldAfterRollback"),
        ),
        ({}, {"holds": (Hold("maxRequests", "down", T0 + timedelta(seconds=1)),)}, QUEUE),
        ({}, {"holds": (Hold("maxActiveSeqs", "up", T0 + timedelta(seconds=1)),)}, QUEUE),
        ({}, {"holds": (Hold("maxRequests", "up", T0),)}, QUEUE),
    ],
)
def test_budget_guardrails(
    spec_patch: dict[str, Any], changes: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    decision = decide(spec(**NO_SCALING, **spec_patch), snap(**REJECTING), state(**changes), T0)
    assert brief(decision) == expected


def test_a_budget_move_records_restart_cooldown_and_pending() -> None:
    snapshot = snap(**REJECTING)
    earlier = T0 - timedelta(minutes=70)
    decision = decide(spec(), snapshot, state(restart_times=(earlier,)), T0)
    assert decision.state == state(
        overrides={"maxRequests": 64},
        restart_times=(T0,),  # the one outside the window is forgotten
        retune_cooldown_until=T0 + timedelta(seconds=900),
        pending=PendingRetune("maxRequests", 32, 64, T0, snapshot.figures()),
        arrivals=seen(),
        problem_since=T0,
    )


def test_moving_back_to_the_spec_value_drops_the_override() -> None:
    # Override 16 in force (maxActiveSeqs spec value 8): ITL over at the cap lowers it to 8.
    snapshot = snap(itl_p95=0.1, running=25.6)
    decision = decide(spec(), snapshot, state(overrides={"maxActiveSeqs": 16}), T0)
    assert (brief(decision), decision.state.overrides) == (
        ("SetBudget", "LowerActiveSeqsITL", "maxActiveSeqs", 16, 8),
        {},
    )


def test_the_current_value_is_the_override_in_force() -> None:
    decision = decide(spec(), snap(**REJECTING), state(overrides={"maxRequests": 48}), T0)
    assert brief(decision) == ("SetBudget", "RaiseQueueRejections", "maxRequests", 48, 96)


@pytest.mark.parametrize(
    ("overrides", "spec_patch", "kept"),
    [
        ({"maxRequests": 256}, {}, {"maxRequests": 256}),
        ({"maxRequests": 257}, {}, {}),  # outside [4, 256]: the spec value is in force again
        ({"maxRequests": 64}, {"autotune": {"bounds": {"maxRequests": {"max": 48}}}}, {}),
        ({"maxActiveSeqs": 16}, {"budgets": {"running": {"maxSeqs": 12}}}, {}),  # > maxSeqs
        ({"maxRequests": 64}, {"autotune": {"mode": "Off"}}, {}),  # only Auto keeps overrides
    ],
)
def test_overrides_the_spec_no_longer_allows_are_dropped(
    overrides: dict[str, int], spec_patch: dict[str, Any], kept: dict[str, int]
) -> None:
    decision = decide(spec(**spec_patch), snap(), state(overrides=overrides), T0)
    assert decision.state.overrides == kept
