"""The blocker NewBudgetsSuffice (scaling.new_budgets_suffice): while a budget change settles, a
miss in a metrics window that still holds figures from before it reached every pod adds no pod
when the capacity for the budgets in force says the fleet serves the forecast, and teaches no
capacity; a window of the new budgets only, a load beyond the fleet, or no capacity to size with
still scales up."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.unit.tuning.support import T0, brief, history, snap, spec, state
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.model import (
    CapacityEstimate,
    Decision,
    MetricsSnapshot,
    PendingRetune,
    TuningState,
)

APPLIED = T0 - timedelta(minutes=6)
BEFORE = {"rejection_ratio": 0.05, "ttft_p95": 0.3, "itl_p95": 0.035, "request_rate": 10.0}
# the base snapshot's window is 120 s: settled 60 s ago, half of it is from before the change
SETTLED_RECENTLY = timedelta(seconds=60)
MODEL = (CapacityEstimate(8.0, "model", T0),)  # 2 pods x 80% x 8/s = 12.8/s: they serve 10/s


def settling(settled_ago: timedelta = SETTLED_RECENTLY, rate: float = 10.0) -> TuningState:
    pending = PendingRetune("maxRequests", 32, 64, APPLIED, BEFORE, T0 - settled_ago)
    return state(
        overrides={"maxRequests": 64},
        pending=pending,
        restart_times=(APPLIED,),
        retune_cooldown_until=APPLIED + timedelta(seconds=900),
        arrivals=history(rate, rate, rate, rate),
    )


def refusing(rate: float = 10.0, **changes: Any) -> MetricsSnapshot:
    """5% 503s with TTFT headroom (rule 3: the valve is cooling down, so a scale-up is next)."""
    return snap(request_rate=rate, rejection_rate=0.05 * rate, rejection_ratio=0.05, **changes)


def decided(
    figures: MetricsSnapshot, memory: TuningState, capacities: tuple[CapacityEstimate, ...] = MODEL
) -> Decision:
    return decide(spec(), figures, memory, T0, capacities=capacities)


def test_503s_from_before_the_move_add_no_pod_the_new_budgets_do_not_need() -> None:
    decision = decided(refusing(), settling())
    assert brief(decision) == ("Hold", "RetuneSettling", None, None, None)
    assert decision.message == (
        "queue.maxRequests 32 -> 64 is judged in 120s; 503 ratio 5.0% over budget 1.0% with "
        "TTFT p95 0.30s under SLO 0.50s and KV usage 40.0%, but budget changes cool down for "
        "540s more; the window began before queue.maxRequests 32 -> 64 was on every pod (60s "
        "ago), and 2 serve 10.00/s (the forecast) under 80% of capacity 8.00/s (model) each"
    )
    assert decision.state.desired_replicas == 2
    assert decision.state.capacity is None


def test_a_latency_miss_from_before_the_move_is_held_the_same_way() -> None:
    decision = decided(snap(ttft_p95=0.6), settling())
    assert brief(decision)[:2] == ("Hold", "RetuneSettling")
    assert "TTFT p95 0.60s over SLO 0.50s" in decision.message
    assert "was on every pod (60s ago), and 2 serve 10.00/s" in decision.message


@pytest.mark.parametrize(
    ("why", "figures", "memory", "capacities"),
    [
        (
            "the window holds only the new budgets: 150 s since they were on every pod",
            refusing(),
            settling(timedelta(seconds=150)),
            MODEL,
        ),
        (
            "the forecast needs a fourth pod: 25/s at 6.4 per pod",
            refusing(rate=25.0),
            settling(rate=25.0),
            MODEL,
        ),
        ("no capacity to size with", refusing(), settling(), ()),
    ],
)
def test_a_miss_scales_up_otherwise(
    why: str,
    figures: MetricsSnapshot,
    memory: TuningState,
    capacities: tuple[CapacityEstimate, ...],
) -> None:
    decision = decided(figures, memory, capacities)
    assert brief(decision) == ("ScaleReplicas", "ScaleUpRejections", "replicas", 2, 3), why


def test_a_miss_in_a_window_that_mixes_budgets_teaches_no_capacity() -> None:
    # scaled up (no model estimate), but 5/s a pod was the old valve's limit, not the new one's
    decision = decided(refusing(), settling(), capacities=())
    assert brief(decision)[1] == "ScaleUpRejections"
    assert decision.state.capacity is None
    fresh = decided(refusing(), settling(timedelta(seconds=150)), capacities=())
    assert fresh.state.capacity is not None and fresh.state.capacity.per_pod == 5.0
