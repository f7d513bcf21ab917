"""A deterministic closed loop: decide() against a toy fleet, pass after pass, without oscillation.

The toy fleet is a caricature of vLLM's layers (not the twin): per pod, demand beyond
maxRequests is refused with 503, up to maxActiveSeqs run, the rest wait; ITL grows with the
decode batch, TTFT with the queue. Rollouts are instant (no fleet view), passes 60 s apart.
"""

from __future__ import annotations

from datetime import timedelta

from tests.unit.tuning.support import T0, snap, spec
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.model import MetricsSnapshot, TuningState

SPEC = spec(budgets={"queue": {"maxRequests": 8}}, autoscaling={"maxReplicas": 3})


def toy_fleet(state: TuningState, demand: float, minute: int) -> MetricsSnapshot:
    replicas = state.desired_replicas or SPEC.replicas
    queue = state.overrides.get("maxRequests", 8)
    cap = state.overrides.get("maxActiveSeqs", 8)
    per_pod = demand / replicas
    admitted = min(per_pod, queue)
    running, ratio = min(admitted, cap), (per_pod - admitted) / per_pod
    waiting = admitted - running
    return snap(
        observed_at=T0 + timedelta(minutes=minute),
        pods_scraped=replicas,
        request_rate=demand / 2,
        rejection_rate=demand / 2 * ratio,
        rejection_ratio=ratio,
        running=running * replicas,
        waiting=waiting * replicas,
        itl_p95=0.010 + 0.006 * running,
        ttft_p95=0.10 + 0.04 * waiting,
        queue_time_p95=0.04 * waiting,
        kv_usage=0.05 * running,
        fleet=None,
    )


def test_busy_then_quiet_settles_without_oscillation() -> None:
    state, moves = TuningState(), []
    for minute in range(80):
        demand = 40.0 if minute < 50 else 6.0  # 40 requests in flight, then 6
        # a GPU free beyond maxReplicas: budget changes roll with surge (rollout_room.py)
        decision = decide(
            SPEC, toy_fleet(state, demand, minute), state, T0 + timedelta(minutes=minute),
            spare_pods=1,
        )  # fmt: skip
        if decision.action.kind != "Hold" or decision.reason in ("RetuneKept", "RollbackWorse"):
            a = decision.action
            moves.append((minute, decision.reason, a.field, a.from_value, a.to_value))
        state = decision.state
    assert moves == [
        (0, "RaiseQueueRejections", "maxRequests", 8, 16),  # 60% refused, TTFT has headroom
        (1, "ScaleUpRejections", "replicas", 2, 3),  # 20% refused, TTFT near its SLO: no waiting
        (4, "RetuneKept", None, None, None),  # judged 180 s after it settled: 503s down
        (15, "LowerActiveSeqsITL", "maxActiveSeqs", 8, 5),  # ITL 58ms; waited out the cooldown
        (19, "RetuneKept", None, None, None),  # ITL 40ms, TTFT still within
        (52, "ScaleDownLowLoad", "replicas", 3, 2),  # third low-load vote after demand fell
    ]
    # One step down only: at 2 replicas the load would not fit well on 1 (6 > 60% of cap 5).
    assert (state.desired_replicas, state.overrides) == (2, {"maxRequests": 16, "maxActiveSeqs": 5})


def test_figures_hovering_at_a_threshold_move_nothing_twice() -> None:
    # ITL alternates just over and just under its SLO at the cap 8, and scales with the cap.
    # One lowering; then the gap between "over" (> SLO) and "well under" (<= 60%) holds still.
    state, moves = TuningState(), []
    for minute in range(60):
        now = T0 + timedelta(minutes=minute)
        cap = state.overrides.get("maxActiveSeqs", 8)
        itl = (0.051 if minute % 2 == 0 else 0.045) * cap / 8
        snapshot = snap(itl_p95=itl, running=2.0 * cap, waiting=4.0, observed_at=now)
        decision = decide(spec(autoscaling=None), snapshot, state, now)
        if decision.action.kind != "Hold":
            moves.append((minute, decision.action.to_value))
        state = decision.state
    assert moves == [(0, 6)]
