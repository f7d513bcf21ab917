"""Rule 8c (tuning/retune_ahead.py): a budget move ahead of a forecast the capped replica lever
cannot carry, made while the SLO still holds and only where its rollout surges. The service: an
L4 3B chat service capped at 2 replicas, 2.2 req/s within the SLO, arrivals climbing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.tuning.support import LONG_AGO, T0, seen, snap, spec, state
from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.planning.candidate import Candidate, Target
from vllm_operator.planning.workload import Workload
from vllm_operator.tuning import retune_ahead, retune_move
from vllm_operator.tuning.canary import divert_to_canary
from vllm_operator.tuning.decide import decide, decide_seeing_spare_gpu
from vllm_operator.tuning.model import (
    Capacity,
    FleetView,
    MetricsSnapshot,
    RateSample,
    TuningState,
)
from vllm_operator.tuning.reasons import Reason
from vllm_operator.tuning.retune_move import Predicted
from vllm_operator.tuning.settings import TuningSettings

L4: dict[str, Any] = {
    "model": "meta-llama/Llama-3.2-3B-Instruct",
    "gpu": {"type": "L4"},
    "engine": {"maxModelLen": 16384},
    "budgets": {
        "queue": {"maxRequests": 64},
        "running": {"maxSeqs": 32, "maxActiveSeqs": None},
        "tokens": {"maxBatchedTokens": 2048},
    },
    "slo": {"ttftP95": "2000ms", "itlP95": "100ms", "maxRejectionRatio": 0.005},
    "autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 2},
}
CAPPED = spec(**L4)
# within the SLO: 2 pods at 2.2 req/s, 160-token answers at 80 ms a token (Little's law: 28 run)
CALM: dict[str, Any] = {
    "request_rate": 2.2,
    "admitted_rate": 2.2,
    "running": 28.0,
    "itl_p95": 0.08,
    "ttft_p95": 1.0,
    "queue_time_p95": 0.1,
    "prompt_tokens_per_request": 1000.0,
}
FIGURES = snap(**CALM)
# 1.6, then 1.9 req/s the two passes before: the trend forecasts 3.3/s a ready time ahead
CLIMBING = (*seen(1.6, T0 - timedelta(minutes=2)), *seen(1.9, T0 - timedelta(minutes=1)))
PER_POD = Capacity(1.5, T0 - timedelta(minutes=10))  # 3.3/s needs ceil(3.3 / 1.35) = 3 pods
BEFORE = state(capacity=PER_POD, arrivals=CLIMBING)


def test_at_the_cap_the_move_comes_before_the_miss_and_surges() -> None:
    d = decide(CAPPED, FIGURES, BEFORE, T0, spare_pods=1)
    assert d.reason == Reason.RETUNE_AHEAD, d.message
    assert d.action.kind == "SetBudget" and d.action.field == "maxBatchedTokens"
    assert d.action.from_value == 2048 and d.action.to_value is not None
    assert d.message.startswith("arrivals 2.20/s now, 3.30/s forecast in 300s")
    assert "needs 3 replicas, replicas at maxReplicas 2" in d.message
    assert "in one move (the engine model predicts at 3.67/s 503 0.0%" in d.message
    assert d.message.endswith("a GPU of the type is free: the rollout surges)")
    assert d.state.overrides == {"maxBatchedTokens": d.action.to_value}
    assert d.state.pending is not None  # rule 1 judges it like any other change


def test_latency_is_never_bought_with_503s() -> None:
    """With the token budget pinned, the model's best share "in the SLO" closes the valve to 16
    and refuses a fifth of the requests: not a move ahead of anything."""
    bounds = {"maxBatchedTokens": {"min": 2048, "max": 2048}}
    pinned = spec(**{**L4, "autotune": {"bounds": bounds}})
    d = decide(pinned, FIGURES, BEFORE, T0, spare_pods=1)
    assert d.action.kind != "SetBudget" and d.state.overrides == {}, d.message


def test_not_looked_yet_asks_for_a_free_gpu_and_decides_again() -> None:
    first = decide(CAPPED, FIGURES, BEFORE, T0)
    assert first.reason != Reason.RETUNE_AHEAD and first.asks_spare_gpu
    assert first.state.overrides == {}
    args = (CAPPED, FIGURES, BEFORE, T0, TuningSettings(), ())
    assert decide_seeing_spare_gpu(*args, lambda: 1).reason == Reason.RETUNE_AHEAD
    # no GPU free: ahead of a miss no move is worth a pod's capacity
    held = decide_seeing_spare_gpu(*args, lambda: 0)
    assert held.action.kind != "SetBudget" and held.state.overrides == {}


def test_below_the_cap_the_replica_lever_does_it() -> None:
    roomy = spec(**{**L4, "autoscaling": {**L4["autoscaling"], "maxReplicas": 4}})
    d = decide(roomy, FIGURES, BEFORE, T0, spare_pods=1)
    assert (d.reason, d.action.kind, d.action.to_value) == (Reason.SCALE_UP_FORECAST,
                                                             "ScaleReplicas", 3)  # fmt: skip


def test_a_flat_load_is_no_move_ahead() -> None:
    """Nothing to forecast: at the cap with no pod to save, a move is rule 9b's on what every
    pod serves (RetuneForCapacity), never one ahead of a load."""
    flat = state(capacity=PER_POD, arrivals=seen(2.2, T0 - timedelta(minutes=1)))
    d = decide(CAPPED, FIGURES, flat, T0, spare_pods=1)
    assert d.reason == Reason.RETUNE_FOR_CAPACITY, d.message
    assert "no move keeps as many requests in it on fewer" in d.message
    assert "the replica lever reaches 2 (maxReplicas)" in d.message


def test_a_problem_is_rule_1b_s_not_a_forecast_s() -> None:
    missing = snap(**{**CALM, "itl_p95": 0.12})
    d = decide(CAPPED, missing, BEFORE, T0, spare_pods=1)
    assert d.reason != Reason.RETUNE_AHEAD


def test_the_model_seeing_the_budgets_carry_the_forecast_moves_nothing() -> None:
    """A capacity learned far too low asks for 3 pods; the model sees 2 carry 3.3/s."""
    timid = state(capacity=Capacity(0.1, T0 - timedelta(minutes=10)),
                  arrivals=(*seen(0.16, T0 - timedelta(minutes=2)),
                            *seen(0.19, T0 - timedelta(minutes=1))))  # fmt: skip
    light = snap(**{**CALM, "request_rate": 0.22, "admitted_rate": 0.22, "running": 2.8})
    d = decide(CAPPED, light, timid, T0, spare_pods=1)
    assert d.reason != Reason.RETUNE_AHEAD and d.state.overrides == {}


def test_spent_restarts_and_pending_changes_stop_it() -> None:
    twice = (T0 - timedelta(minutes=20), T0 - timedelta(minutes=10))  # maxRestartsPerHour 2
    spent = state(capacity=PER_POD, arrivals=CLIMBING, restart_times=twice)
    assert decide(CAPPED, FIGURES, spent, T0, spare_pods=1).reason != Reason.RETUNE_AHEAD
    cooling = state(capacity=PER_POD, arrivals=CLIMBING,
                    retune_cooldown_until=T0 + timedelta(minutes=5))  # fmt: skip
    assert decide(CAPPED, FIGURES, cooling, T0, spare_pods=1).reason != Reason.RETUNE_AHEAD


def _climb(rate: float, growth: float) -> tuple[RateSample, ...]:
    return (*seen(rate / growth**2, T0 - timedelta(minutes=2)),
            *seen(rate / growth, T0 - timedelta(minutes=1)))  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(
    rate=st.floats(0.5, 4.0),
    growth=st.floats(1.0, 1.3),
    per_pod=st.floats(0.5, 3.0),
    max_replicas=st.integers(1, 3),
    spare=st.sampled_from([None, 0, 1, 2]),
)
def test_a_move_ahead_only_at_the_cap_on_a_rising_forecast_and_with_surge(
    rate: float, growth: float, per_pod: float, max_replicas: int, spare: int | None
) -> None:
    scaling = {**L4["autoscaling"], "maxReplicas": max_replicas}
    service: VLLMServiceSpec = spec(**{**L4, "replicas": max_replicas, "autoscaling": scaling})
    pods = {"pods_expected": max_replicas, "pods_scraped": max_replicas}
    figures: MetricsSnapshot = snap(**{**CALM, **pods, "request_rate": rate,
                                       "admitted_rate": rate, "running": rate * 12.8})  # fmt: skip
    fleet = replace(figures, fleet=FleetView(desired=max_replicas, ready=max_replicas,
                                             updated=max_replicas, rolling=False))  # fmt: skip
    before: TuningState = state(capacity=Capacity(per_pod, T0 - timedelta(minutes=10)),
                                arrivals=_climb(rate, growth), desired_replicas=max_replicas,
                                last_scale_at=LONG_AGO)  # fmt: skip
    d = decide(service, fleet, before, T0, spare_pods=spare)
    if d.reason == Reason.RETUNE_AHEAD:  # the lever capped, a free GPU, the load climbing
        assert spare is not None and spare > 0
        assert d.action.kind == "SetBudget" and d.state.pending is not None
        assert f"replicas at maxReplicas {max_replicas}" in d.message
        assert "needs" in d.message and "the rollout surges" in d.message


def test_the_present_is_never_traded_for_the_forecast(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model that sees a smaller token budget carry the forecast but lose today's requests:
    nothing moves. The same model seeing today's kept: the move is made."""

    def model(today_with_512: float) -> Callable[..., Predicted]:
        def predict(c: Candidate, _model: str, _t: Target, load: Workload) -> Predicted:
            small = c.budget("max_num_batched_tokens") == 512
            ahead = (load.rate or 0.0) > 3.0
            share = {(True, False): 0.3, (True, True): 0.6, (False, False): 0.9,
                     (False, True): today_with_512}[ahead, small]  # fmt: skip
            itl = 0.08 if share > 0.5 else 0.13
            return Predicted(0.0, 0.8, itl, 1.4, share)

        return predict

    for module in (retune_ahead, retune_move):
        monkeypatch.setattr(module, "predict", model(0.5))
    assert decide(CAPPED, FIGURES, BEFORE, T0, spare_pods=1).state.overrides == {}
    for module in (retune_ahead, retune_move):
        monkeypatch.setattr(module, "predict", model(0.9))
    d = decide(CAPPED, FIGURES, BEFORE, T0, spare_pods=1)
    assert d.reason == Reason.RETUNE_AHEAD and d.state.overrides == {"maxBatchedTokens": 512}


def test_recommend_shows_the_move_ahead_and_a_canary_runs_it_first() -> None:
    advised = decide(spec(**{**L4, "autotune": {"mode": "Recommend"}}), FIGURES, BEFORE, T0,
                     spare_pods=1)  # fmt: skip
    assert advised.reason == Reason.RETUNE_AHEAD and not advised.applied
    assert advised.state.overrides == {} and advised.state.pending is None
    canary = spec(**{**L4, "autotune": {"canary": True}})
    made = decide(canary, FIGURES, BEFORE, T0, spare_pods=1)
    started = divert_to_canary(made, BEFORE, T0)  # what the tune handler does with canary on
    assert started.reason == Reason.CANARY_STARTED and started.state.overrides == {}
    assert started.state.canary is not None
    assert started.state.canary.to_value == made.action.to_value
