"""Rules 2 and 3: 503s over budget. Scale up when TTFT has no headroom; else open the valve."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.tuning.support import T0, brief, snap, spec, state
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.limits import compute_at_bound

UP = ("ScaleReplicas", "ScaleUpRejections", "replicas", 2, 3)
QUEUE = ("SetBudget", "RaiseQueueRejections", "maxRequests", 32, 64)
WITHIN = ("Hold", "WithinSLO", None, None, None)
REJECTING = {"rejection_ratio": 0.05, "rejection_rate": 0.5}


@pytest.mark.parametrize(
    ("spec_patch", "changes", "expected"),
    [
        # The budget (1%) itself is within it; just above is over.
        ({}, {"rejection_ratio": 0.01}, WITHIN),
        ({}, {"rejection_ratio": 0.0101}, QUEUE),
        # Below min_request_rate (0.05 req/s) the ratio is noise.
        ({}, {**REJECTING, "request_rate": 0.049}, WITHIN),
        ({}, {**REJECTING, "request_rate": 0.05}, QUEUE),
        # TTFT headroom ends at 80% of the SLO (0.40s of 0.50s).
        ({}, {**REJECTING, "ttft_p95": 0.399}, QUEUE),
        ({}, {**REJECTING, "ttft_p95": 0.4}, UP),
        ({}, {**REJECTING, "ttft_p95": 0.9}, UP),
        ({}, {**REJECTING, "ttft_p95": None}, UP),  # unmeasured: no evidence of headroom
        ({"slo": {"ttftP95": None}}, {**REJECTING, "ttft_p95": 9.0}, QUEUE),  # no TTFT target
        # No maxRejectionRatio: the default budget is 1%.
        ({"slo": {"maxRejectionRatio": None}}, {"rejection_ratio": 0.0101}, QUEUE),
        ({"slo": {"maxRejectionRatio": 0.1}}, REJECTING, WITHIN),
        # KV headroom ends at 80%; unmeasured KV is no headroom.
        ({}, {**REJECTING, "kv_usage": 0.79}, QUEUE),
        ({}, {**REJECTING, "kv_usage": 0.8}, UP),
        ({}, {**REJECTING, "kv_usage": None}, UP),
    ],
)
def test_rejection_thresholds(
    spec_patch: dict[str, Any], changes: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    assert brief(decide(spec(**spec_patch), snap(**changes), state(), T0)) == expected


NO_SCALING = {"autoscaling": None}
BOUNDED = {"autotune": {"bounds": {"maxRequests": {"max": 32}}}}


@pytest.mark.parametrize(
    ("spec_patch", "changes", "replicas", "expected"),
    [
        # Rule 2 has one remedy; when it cannot act the hold names the pinned bound.
        ({}, {"ttft_p95": 0.6}, 4, ("Hold", "AtMaxReplicas", None, None, None)),
        (NO_SCALING, {"ttft_p95": 0.6}, 2, ("Hold", "AutoscalingOff", None, None, None)),
        # Rule 3 falls back to scaling when the valve cannot open ...
        ({"autotune": {"mode": "Off"}}, {}, 2, UP),
        ({"budgets": {"queue": None}}, {}, 2, UP),  # unset = unlimited: nothing to raise
        (BOUNDED, {}, 2, UP),
        # ... and holds with the most telling blocker when neither can act.
        ({**BOUNDED, **NO_SCALING}, {}, 2, ("Hold", "BudgetAtBound", None, None, None)),
        ({"autotune": {"mode": "Off"}}, {}, 4, ("Hold", "AtMaxReplicas", None, None, None)),
        # A bound below the x2 step caps the step.
        ({"autotune": {"bounds": {"maxRequests": {"max": 48}}}}, {}, 2, (*QUEUE[:4], 48)),
    ],
)
def test_rejection_remedies(
    spec_patch: dict[str, Any], changes: dict[str, Any], replicas: int, expected: tuple[Any, ...]
) -> None:
    decision = decide(
        spec(**spec_patch), snap(**REJECTING, **changes), state(desired_replicas=replicas), T0
    )
    assert brief(decision) == expected


TOKENS_SET = {"budgets": {"queue": {"maxPrefillTokens": 1000}}}


@pytest.mark.parametrize(
    ("spec_patch", "by_reason", "expected_field", "expected_to"),
    [
        (
            TOKENS_SET,
            {"max_num_queued_tokens": 0.4, "max_num_queued_reqs": 0.1},
            "maxPrefillTokens",
            2000,
        ),
        (TOKENS_SET, {"max_num_queued_tokens": 0.1, "max_num_queued_reqs": 0.4}, "maxRequests", 64),
        (TOKENS_SET, {}, "maxRequests", 64),  # no split: the request cap (checked first by vLLM)
        (
            {"budgets": {"queue": {"maxRequests": None, "maxPrefillTokens": 1000}}},
            {},
            "maxPrefillTokens",
            2000,
        ),
    ],
)
def test_the_valve_that_refuses_is_the_one_raised(
    spec_patch: dict[str, Any], by_reason: dict[str, float], expected_field: str, expected_to: int
) -> None:
    snapshot = snap(**REJECTING, rejection_rate_by_reason=by_reason)
    decision = decide(spec(**spec_patch), snapshot, state(), T0)
    assert (decision.action.field, decision.action.to_value) == (expected_field, expected_to)


def test_messages_carry_the_figures() -> None:
    rule2 = decide(
        spec(), snap(rejection_rate=0.41, rejection_ratio=0.041, ttft_p95=0.82), state(), T0
    )
    assert (
        rule2.message
        == "503 ratio 4.1% over budget 1.0% with TTFT p95 0.82s over SLO 0.50s: replicas 2 -> 3"
    )
    held = decide(spec(**NO_SCALING, **BOUNDED), snap(**REJECTING), state(), T0)
    assert held.message == (
        "503 ratio 5.0% over budget 1.0% with TTFT p95 0.30s under SLO 0.50s and KV usage 40.0%, "
        "but queue.maxRequests 32 at its max 32; autoscaling is off"
    )
    assert held.figures == snap(**REJECTING).figures()


def test_a_hold_at_a_bound_names_the_pinned_field_for_the_gauge() -> None:
    """vllm_operator_tuning_at_bound (alert VLLMOperatorTunerPinnedAtBound) comes from here."""
    pinned = decide(spec(**BOUNDED, **NO_SCALING), snap(**REJECTING), state(desired_replicas=2), T0)
    assert pinned.pinned == ("maxRequests",)
    assert compute_at_bound(pinned.pinned) == {
        "queue.maxRequests": 1,
        "queue.maxPrefillTokens": 0,
        "running.maxActiveSeqs": 0,
        "tokens.maxBatchedTokens": 0,
    }
    # free again (the bound widened): every field back to 0
    free = decide(spec(**NO_SCALING), snap(**REJECTING), state(desired_replicas=2), T0)
    assert brief(free) == QUEUE and free.pinned == ()
    assert set(compute_at_bound(free.pinned).values()) == {0}
    # not a bound: autoscaling off and at maxReplicas pin nothing
    at_max = decide(spec(), snap(**REJECTING, ttft_p95=0.6), state(desired_replicas=4), T0)
    assert brief(at_max)[:2] == ("Hold", "AtMaxReplicas") and at_max.pinned == ()
