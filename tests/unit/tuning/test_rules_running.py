"""Rules 4-7: the running layer, the token budget, and scaling for latency."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.unit.tuning.support import T0, at_cap, brief, snap, spec, state
from vllm_operator.tuning.decide import decide

WITHIN = ("Hold", "WithinSLO", None, None, None)
SCALE_UP = ("ScaleReplicas", "ScaleUpLatency", "replicas", 2, 3)


def lower(to: int, reason: str = "LowerActiveSeqsITL") -> tuple[Any, ...]:
    return ("SetBudget", reason, "maxActiveSeqs", 8, to)


@pytest.mark.parametrize(
    ("spec_patch", "changes", "expected"),
    [
        # ITL over SLO (50ms) with the cap binding (>= 80% of 8 per pod): aim at 80% of the SLO.
        ({}, {"itl_p95": 0.051, "running": at_cap()}, lower(6)),  # 8 x 0.8 x 50/51 = 6.27
        ({}, {"itl_p95": 0.05, "running": at_cap()}, WITHIN),  # at the SLO is within it
        ({}, {"itl_p95": 0.5, "running": at_cap()}, lower(4)),  # the /2 step caps it
        # A cut that lands below the current batch binds even short of the cap (6.3 > 6) ...
        ({}, {"itl_p95": 0.051, "running": at_cap(6.3)}, lower(6)),
        # ... one that would stay above it changes nothing, so rule 7 scales instead.
        ({}, {"itl_p95": 0.051, "running": at_cap(6.0)}, SCALE_UP),
        # Preemptions with the cap binding: 80% of the cap, whatever ITL says.
        ({}, {"preemption_rate": 0.01, "running": at_cap()}, lower(6, "LowerActiveSeqsPreemption")),
        ({}, {"preemption_rate": 0.01, "running": at_cap(6.0)}, WITHIN),
        # Fallbacks: a pinned bound, autotune Off, no known cap -> more replicas.
        (
            {"autotune": {"bounds": {"maxActiveSeqs": {"min": 8}}}},
            {"itl_p95": 0.06, "running": at_cap()},
            SCALE_UP,
        ),
        ({"autotune": {"mode": "Off"}}, {"itl_p95": 0.06, "running": at_cap()}, SCALE_UP),
        ({"budgets": {"running": None}}, {"itl_p95": 0.06, "running": at_cap()}, SCALE_UP),
        # No ITL SLO: the ITL rules are off.
        ({"slo": {"itlP95": None}}, {"itl_p95": 0.5, "running": at_cap()}, WITHIN),
        # maxActiveSeqs unset defaults to maxSeqs (16): that is the value lowered.
        (
            {"budgets": {"running": {"maxActiveSeqs": None}}},
            {"itl_p95": 0.064, "running": at_cap(12.8)},
            ("SetBudget", "LowerActiveSeqsITL", "maxActiveSeqs", 16, 10),
        ),
    ],
)
def test_running_too_big(
    spec_patch: dict[str, Any], changes: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    assert brief(decide(spec(**spec_patch), snap(**changes), state(), T0)) == expected


WAITING = {"itl_p95": 0.03, "waiting": 2.0, "running": at_cap(), "kv_usage": 0.4}
RAISE = ("SetBudget", "RaiseActiveSeqsWaiting", "maxActiveSeqs", 8, 11)  # 8 x 0.8 x 50/30 = 10.7


@pytest.mark.parametrize(
    ("spec_patch", "changes", "expected"),
    [
        ({}, {}, RAISE),
        ({}, {"itl_p95": 0.031}, WITHIN),  # well under ends at 60% of the SLO
        ({}, {"waiting": 1.9}, WITHIN),  # under 1 waiting per pod
        ({}, {"kv_usage": 0.8}, WITHIN),
        ({}, {"running": at_cap(6.3)}, WITHIN),  # the cap does not hold them back
        ({"slo": {"itlP95": None}}, {}, WITHIN),
        ({}, {"itl_p95": 0.001}, ("SetBudget", "RaiseActiveSeqsWaiting", "maxActiveSeqs", 8, 16)),
        # At maxSeqs nothing can be raised; the rule lets the chain go on.
        ({"budgets": {"running": {"maxActiveSeqs": 16}}}, {"running": at_cap(12.8)}, WITHIN),
    ],
)
def test_waiting_at_cap(
    spec_patch: dict[str, Any], changes: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    assert (
        brief(decide(spec(**spec_patch), snap(**{**WAITING, **changes}), state(), T0)) == expected
    )


def test_a_blocked_opportunity_lets_later_rules_act() -> None:
    cooling = state(retune_cooldown_until=T0 + timedelta(minutes=1))
    decision = decide(spec(), snap(**WAITING, ttft_p95=0.6, queue_time_p95=0.5), cooling, T0)
    assert brief(decision) == SCALE_UP


PREFILL = {
    "ttft_p95": 0.6,
    "queue_time_p95": 0.29,
    "prompt_tokens_per_request": 1024.0,
    "itl_p95": 0.03,
}
TOKENS = ("SetBudget", "RaiseBatchedTokensTTFT", "maxBatchedTokens", 4096, 6144)  # x 0.6/0.4


@pytest.mark.parametrize(
    ("spec_patch", "changes", "expected"),
    [
        ({}, {}, TOKENS),
        ({}, {"ttft_p95": 0.5}, WITHIN),  # at the SLO
        ({}, {"queue_time_p95": 0.3}, SCALE_UP),  # half of TTFT queued: not prefill-bound
        ({}, {"queue_time_p95": None}, SCALE_UP),
        ({}, {"prompt_tokens_per_request": 1023.0}, SCALE_UP),  # under 25% of the token budget
        ({}, {"itl_p95": 0.031}, SCALE_UP),  # ITL not quiet enough to give up
        ({"slo": {"itlP95": None}}, {"itl_p95": 0.2}, TOKENS),
        ({"budgets": {"tokens": None}}, {}, SCALE_UP),  # vLLM's default is unknown
        ({}, {"ttft_p95": 2.0}, (*TOKENS[:4], 8192)),  # x2 at most
    ],
)
def test_prefill_bound(
    spec_patch: dict[str, Any], changes: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    assert (
        brief(decide(spec(**spec_patch), snap(**{**PREFILL, **changes}), state(), T0)) == expected
    )


@pytest.mark.parametrize(
    ("spec_patch", "last_scale", "replicas", "expected"),
    [
        ({}, timedelta(seconds=60), 2, SCALE_UP),
        ({}, timedelta(seconds=59), 2, ("Hold", "ScaleUpCooldown", None, None, None)),
        ({}, timedelta(hours=1), 4, ("Hold", "AtMaxReplicas", None, None, None)),
        (
            {"autoscaling": None},
            timedelta(hours=1),
            2,
            ("Hold", "AutoscalingOff", None, None, None),
        ),
    ],
)
def test_latency_over_scales_up(
    spec_patch: dict[str, Any], last_scale: timedelta, replicas: int, expected: tuple[Any, ...]
) -> None:
    before = state(last_scale_at=T0 - last_scale, desired_replicas=replicas)
    decision = decide(spec(**spec_patch), snap(ttft_p95=0.6, queue_time_p95=0.5), before, T0)
    assert brief(decision) == expected


def test_latency_hold_names_the_figures_and_the_blocker() -> None:
    decision = decide(spec(autoscaling=None), snap(ttft_p95=0.6, itl_p95=0.06), state(), T0)
    assert decision.message == (
        "TTFT p95 0.60s over SLO 0.50s and ITL p95 60ms over SLO 50ms with 4.0 running and "
        "0.0 waiting per pod (active cap 8), but autoscaling is off"
    )


def test_a_cut_limited_by_the_step_must_still_bind() -> None:
    # ITL 10x the SLO asks for a cap of ~0.8 x 8 / 10, but one step only halves it (to 4):
    # with 3.5 running per pod that cap would not shrink the batch, so rule 7 scales instead.
    decision = decide(spec(), snap(itl_p95=0.5, running=at_cap(3.5)), state(), T0)
    assert brief(decision) == SCALE_UP
    decision = decide(spec(), snap(itl_p95=0.5, running=at_cap(4.5)), state(), T0)
    assert brief(decision) == lower(4)
