"""Mode Recommend: act exactly as mode Off would, and record what Auto would do to the budgets."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.unit.tuning.support import T0, brief, seen, snap, spec, state
from vllm_operator.tuning.decide import decide

RECOMMEND = {"autotune": {"mode": "Recommend"}}
NO_SCALING = {"autoscaling": None}
REJECTING = {"rejection_ratio": 0.05, "rejection_rate": 0.5}
ITL_AT_CAP = {"itl_p95": 0.07, "running": 12.8}


@pytest.mark.parametrize(
    ("spec_patch", "changes", "expected", "applied"),
    [
        # Nothing but budgets could act: the advice is the decision, not applied.
        (
            NO_SCALING,
            REJECTING,
            ("SetBudget", "RaiseQueueRejections", "maxRequests", 32, 64),
            False,
        ),
        (NO_SCALING, ITL_AT_CAP, ("SetBudget", "LowerActiveSeqsITL", "maxActiveSeqs", 8, 4), False),
        # Replicas can act: they do, as in mode Off.
        ({}, REJECTING, ("ScaleReplicas", "ScaleUpRejections", "replicas", 2, 3), True),
        ({}, ITL_AT_CAP, ("ScaleReplicas", "ScaleUpLatency", "replicas", 2, 3), True),
        # Auto's blocker is the more telling hold.
        (
            {
                **NO_SCALING,
                "autotune": {"mode": "Recommend", "bounds": {"maxRequests": {"max": 32}}},
            },
            REJECTING,
            ("Hold", "BudgetAtBound", None, None, None),
            True,
        ),
        (NO_SCALING, {}, ("Hold", "WithinSLO", None, None, None), True),
    ],
)
def test_recommend_decisions(
    spec_patch: dict[str, Any], changes: dict[str, Any], expected: tuple[Any, ...], applied: bool
) -> None:
    decision = decide(spec(**{**RECOMMEND, **spec_patch}), snap(**changes), state(), T0)
    assert (brief(decision), decision.applied) == (expected, applied)


def test_a_recommendation_changes_no_state() -> None:
    before = state(overrides={"maxRequests": 64}, scale_down_votes=2)
    decision = decide(spec(**RECOMMEND, **NO_SCALING), snap(**REJECTING), before, T0)
    # Overrides are not in force outside Auto, so the advice starts from the spec value, and
    # nothing is remembered: no override, restart, cooldown or pending judgement.
    assert (brief(decision)[3:], decision.state) == (
        (32, 64),
        replace(
            before,
            overrides={},
            desired_replicas=None,
            scale_down_votes=0,
            arrivals=seen(),
            problem_since=T0,  # what the pass saw, not what it did
        ),
    )


def test_recommend_repeats_its_advice_every_pass() -> None:
    first = decide(spec(**RECOMMEND, **NO_SCALING), snap(**REJECTING), state(), T0)
    second = decide(spec(**RECOMMEND, **NO_SCALING), snap(**REJECTING), first.state, T0)
    assert brief(second) == brief(first)


def test_a_replica_move_mentions_the_advice() -> None:
    decision = decide(spec(**RECOMMEND), snap(**REJECTING), state(), T0)
    assert decision.message == (
        "503 ratio 5.0% over budget 1.0% with TTFT p95 0.30s under SLO 0.50s and KV usage 40.0%: "
        "replicas 2 -> 3 (autotune would set queue.maxRequests 32 -> 64)"
    )


def test_recommend_counts_low_load_votes() -> None:
    low = snap(running=4.8, itl_p95=0.02, kv_usage=0.4)
    decision = decide(spec(**RECOMMEND), low, state(scale_down_votes=1), T0)
    assert (decision.reason, decision.state.scale_down_votes) == ("ScaleDownVoting", 2)
