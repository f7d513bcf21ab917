"""Learned per-pod capacity: a missed SLO teaches it; it scales up ahead and judges a step down.

The base snapshot: 10 req/s over 2 pods (5 per pod), TTFT at 60% and ITL at 70% of their SLOs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.tuning.support import LONG_AGO, T0, brief, snap, spec, state
from tests.unit.tuning.test_evaluate import ROLLBACK, judged
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.model import Capacity, ReadyTime
from vllm_operator.tuning.settings import TuningSettings

RECENT = T0 - timedelta(minutes=10)
KNOWN = Capacity(6.0, RECENT)  # near it: 0.8 x 6 = 4.8 req/s per pod
UP = ("ScaleReplicas", "ScaleUpNearCapacity", "replicas", 2, 3)
WITHIN = ("Hold", "WithinSLO", None, None, None)


@pytest.mark.parametrize(
    ("last_scale", "known", "learned"),
    [
        (None, KNOWN, Capacity(5.0, T0)),  # no change remembered: learn what this window says
        (None, None, Capacity(5.0, T0)),
        # the window (120 s) and the pods a change started (420 s) are past: a clean reading
        (T0 - timedelta(seconds=540), KNOWN, Capacity(5.0, T0)),
        # a window that may mix two fleet sizes reads low: keep the clean one ...
        (T0 - timedelta(seconds=539), KNOWN, KNOWN),
        # ... but with none known, a window that began after the pods of the change were Ready
        # (default ready time 300 s + window 120 s) is the best reading there is
        (T0 - timedelta(seconds=420), None, Capacity(5.0, T0)),
        # and one that began before holds the fleet before the change: its arrivals, divided
        # by the pods after it, would size the fleet too big; nothing is learned
        (T0 - timedelta(seconds=419), None, None),
    ],
)
def test_a_missed_slo_teaches_capacity(
    last_scale: Any, known: Capacity | None, learned: Capacity | None
) -> None:
    before = state(capacity=known, last_scale_at=last_scale)
    decision = decide(spec(), snap(ttft_p95=0.6), before, T0)
    assert brief(decision)[:2] == ("ScaleReplicas", "ScaleUpLatency")
    assert decision.state.capacity == learned


def test_a_first_capacity_waits_for_the_learned_ready_time() -> None:
    """The pods' own ready time, once learned, sets when a window holds only the new fleet."""
    slow = ReadyTime(400.0, T0 - timedelta(minutes=1))
    at = T0 - timedelta(seconds=500)  # past 300 + 120, not past 400 + 120
    slow_pods = decide(spec(), snap(ttft_p95=0.6), state(ready_time=slow, last_scale_at=at), T0)
    fast_pods = decide(spec(), snap(ttft_p95=0.6), state(last_scale_at=at), T0)
    assert (slow_pods.state.capacity, fast_pods.state.capacity) == (None, Capacity(5.0, T0))


@settings(derandomize=True, max_examples=60, deadline=None)
@given(
    since=st.floats(min_value=60.0, max_value=800.0),
    rate=st.floats(min_value=1.0, max_value=40.0),
    known=st.none() | st.floats(min_value=0.5, max_value=20.0),
)
def test_a_miss_learns_only_from_a_window_after_the_change(
    since: float, rate: float, known: float | None
) -> None:
    """Whatever the load and what was known, a miss read too soon after a replica change (for a
    known capacity: window + pod_ready_allowance; for a first one: window + ready time) leaves
    the capacity as it was; one read later learns the window's arrivals per pod."""
    before_capacity = None if known is None else Capacity(known, RECENT)
    before = state(capacity=before_capacity, last_scale_at=T0 - timedelta(seconds=since))
    decision = decide(spec(), snap(ttft_p95=0.6, request_rate=rate), before, T0)
    assert decision.action.kind == "ScaleReplicas"
    settle = 120.0 + (300.0 if known is None else 420.0)
    expected = Capacity(rate / 2, T0) if since >= settle else before_capacity
    assert decision.state.capacity == expected


def test_without_a_usable_rate_nothing_is_learned() -> None:
    decision = decide(spec(), snap(ttft_p95=0.6, request_rate=0.01), state(), T0)
    assert decision.state.capacity is None


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, UP),  # 5.0 per pod >= 4.8, ITL at 70% of SLO is no longer quiet
        ({"request_rate": 9.5}, WITHIN),  # 4.75 per pod: not near yet
        ({"itl_p95": 0.03}, WITHIN),  # everything quiet: the capacity may be a heavier mix's
        ({"itl_p95": 0.03, "ttft_p95": 0.31}, UP),
        ({"itl_p95": 0.03, "rejection_ratio": 0.007, "rejection_rate": 0.07}, UP),
    ],
)
def test_near_capacity_scales_up_ahead(changes: dict[str, Any], expected: tuple[Any, ...]) -> None:
    decision = decide(spec(), snap(**changes), state(capacity=KNOWN), T0)
    assert brief(decision) == expected
    assert decision.state.capacity == KNOWN  # a scale up ahead proves nothing about capacity


def test_near_capacity_message_names_the_figures() -> None:
    decision = decide(spec(), snap(), state(capacity=KNOWN), T0)
    assert decision.message == (
        "arrivals 5.00/s per pod (capacity 6.00/s learned 11:50:00Z) with TTFT p95 0.30s under "
        "SLO 0.50s and ITL p95 35ms under SLO 50ms: replicas 2 -> 3"
    )


def test_near_capacity_adds_what_the_capacity_says_the_present_needs() -> None:
    """Sized by the capacity, not a +50% step: 20/s on 4 pods at 6/s each needs 5 for every
    pod to sit under 80% of it (4 would leave 5.0 each, over 4.8), not 6."""
    four = snap(request_rate=20.0, pods_expected=4, pods_scraped=4)
    roomy = spec(replicas=4, autoscaling={"maxReplicas": 8})
    decision = decide(roomy, four, state(capacity=KNOWN, desired_replicas=4), T0)
    assert brief(decision) == ("ScaleReplicas", "ScaleUpNearCapacity", "replicas", 4, 5)


@settings(max_examples=60, deadline=None)
@given(
    pods=st.integers(min_value=1, max_value=12),
    per_pod=st.floats(min_value=4.81, max_value=5.9),  # near 6/s, under the raising headroom
)
def test_near_capacity_target_is_the_fewest_pods_under_headroom(pods: int, per_pod: float) -> None:
    """Whatever the fleet, rule 8b's target leaves every pod under 80% of the capacity, one pod
    fewer would not, and it adds at least one pod (within maxReplicas 16)."""
    rate = pods * per_pod
    figures = snap(request_rate=rate, pods_expected=pods, pods_scraped=pods)
    fleet_spec = spec(replicas=pods, autoscaling={"maxReplicas": 16})
    decision = decide(fleet_spec, figures, state(capacity=KNOWN, desired_replicas=pods), T0)
    assert decision.reason == "ScaleUpNearCapacity"
    target = decision.action.to_value
    room = TuningSettings().headroom * KNOWN.per_pod
    assert target is not None and target > pods
    assert rate / target < room
    assert target == pods + 1 or rate / (target - 1) >= room


def test_near_capacity_at_max_replicas_holds_within_slo() -> None:
    decision = decide(spec(), snap(), state(capacity=KNOWN, desired_replicas=4), T0)
    assert brief(decision) == WITHIN
    assert decision.message.endswith("arrivals 5.00/s per pod (capacity 6.00/s learned 11:50:00Z)")


@pytest.mark.parametrize(
    ("changes", "per_pod"),
    [
        ({"request_rate": 14.0}, 7.0),  # served 7 per pod with headroom: a pod can do more
        ({"request_rate": 14.0, "ttft_p95": 0.4}, 6.0),  # TTFT at 80%: no headroom, no proof
        ({"request_rate": 14.0, "rejection_ratio": 0.01, "rejection_rate": 0.14}, 6.0),
        ({"request_rate": 11.0}, 6.0),  # 5.5 per pod: under it, nothing to raise
    ],
)
def test_capacity_is_raised_when_more_is_served_with_headroom(
    changes: dict[str, Any], per_pod: float
) -> None:
    decision = decide(spec(), snap(**changes), state(capacity=KNOWN, desired_replicas=4), T0)
    assert decision.state.capacity is not None
    assert decision.state.capacity.per_pod == per_pod


# Low, by arrivals: 2 req/s, 2 -> 1 pod leaves 2 per pod, under 0.8 x 6.
LOW = {"request_rate": 2.0, "running": 2.0, "ttft_p95": 0.35, "itl_p95": 0.015, "kv_usage": 0.2}


@pytest.mark.parametrize(
    ("changes", "capacity", "expected"),
    [
        # TTFT at 70% of its SLO (a floor of long prompts) is not quiet, but with a learned
        # capacity headroom is enough: the arrivals judge the step
        ({}, KNOWN, ("ScaleReplicas", "ScaleDownLowLoad", "replicas", 2, 1)),
        ({}, None, WITHIN),
        ({"request_rate": 4.81}, KNOWN, WITHIN),  # 4.81 per pod after the step: near it
        ({"request_rate": 4.7}, KNOWN, ("ScaleReplicas", "ScaleDownLowLoad", "replicas", 2, 1)),
        ({"ttft_p95": 0.401}, KNOWN, WITHIN),  # over 80% of its SLO
        ({"ttft_p95": 0.4}, KNOWN, ("ScaleReplicas", "ScaleDownLowLoad", "replicas", 2, 1)),
        # idle: too few requests for percentiles, and the gauges say low
        (
            {"request_rate": 0.0, "ttft_p95": None, "itl_p95": None, "running": 0.0},
            KNOWN,
            ("ScaleReplicas", "ScaleDownLowLoad", "replicas", 2, 1),
        ),
    ],
)
def test_low_load_with_a_capacity(
    changes: dict[str, Any], capacity: Capacity | None, expected: tuple[Any, ...]
) -> None:
    before = state(capacity=capacity, scale_down_votes=2)
    assert brief(decide(spec(), snap(**{**LOW, **changes}), before, T0)) == expected


def test_capacity_is_forgotten_after_its_memory() -> None:
    memory = TuningSettings().capacity_memory
    kept = decide(spec(), snap(), state(capacity=Capacity(6.0, T0 - memory / 2)), T0)
    gone = decide(spec(), snap(), state(capacity=Capacity(6.0, T0 - memory)), T0)
    assert (kept.reason, gone.reason, gone.state.capacity) == (
        "ScaleUpNearCapacity",
        "WithinSLO",
        None,
    )


def test_capacity_is_forgotten_without_autoscaling() -> None:
    decision = decide(spec(autoscaling=None), snap(), state(capacity=KNOWN), T0)
    assert decision.state.capacity is None


def test_a_budget_change_forgets_capacity() -> None:
    rejecting = snap(rejection_ratio=0.05, rejection_rate=0.5)
    before = state(capacity=KNOWN, last_scale_at=LONG_AGO)
    # a GPU free for a surge pod: the two pods carry 10/s, so pod by pod would not roll now
    decision = decide(spec(), rejecting, before, T0, spare_pods=1)
    assert brief(decision) == ("SetBudget", "RaiseQueueRejections", "maxRequests", 32, 64)
    assert decision.state.capacity is None


def test_a_rollback_forgets_capacity() -> None:
    decision = decide(spec(), snap(rejection_ratio=0.0551), judged(capacity=KNOWN), T0)
    assert brief(decision) == ROLLBACK
    assert decision.state.capacity is None
