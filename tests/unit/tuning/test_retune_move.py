"""The engine model's one-move retune: chosen within bounds, made only when it pays."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.tuning.support import T0, snap, spec, state
from vllm_operator.planning.candidate import (
    Candidate,
    Target,
    build_service,
    check_service,
    resolve,
)
from vllm_operator.planning.lengths import Empirical
from vllm_operator.planning.workload import Workload
from vllm_operator.sim.catalog import packaged_catalog
from vllm_operator.tuning import retune_move
from vllm_operator.tuning.decide import decide, decide_seeing_spare_gpu
from vllm_operator.tuning.inputs import Inputs
from vllm_operator.tuning.limits import allowed_range
from vllm_operator.tuning.model import Capacity, ReadyTime, TuningState
from vllm_operator.tuning.reasons import Reason
from vllm_operator.tuning.retune_move import (
    UNDO_FACTOR,
    Predicted,
    candidate_of,
    compute_retune_move,
    decide_retune,
    values_around,
)
from vllm_operator.tuning.settings import TuningSettings

# The L4 3B service with max-num-seqs 256 copied from a blog post, capped at 2 replicas.
L4_256: dict[str, Any] = {
    "model": "meta-llama/Llama-3.2-3B-Instruct",
    "gpu": {"type": "L4"},
    "engine": {"maxModelLen": 16384},
    "budgets": {
        "queue": {"maxRequests": 512},
        "running": {"maxSeqs": 256, "maxActiveSeqs": None},
        "tokens": {"maxBatchedTokens": 2048},
    },
    "slo": {"ttftP95": "2000ms", "itlP95": "110ms", "maxRejectionRatio": 0.005},
    "autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 2},
}
# 2 pods at 4 req/s, 40 running, ITL p95 130 ms over its 110 ms SLO
OVERLOADED: dict[str, Any] = {
    "request_rate": 4.0,
    "admitted_rate": 4.0,
    "running": 40.0,
    "itl_p95": 0.13,
    "ttft_p95": 1.5,
    "prompt_tokens_per_request": 1000.0,
}
SETTINGS = TuningSettings()
# the 503s or latency misses have lasted the snapshot's whole window (120 s): nothing waits
LASTED = T0 - timedelta(seconds=120)


def inputs(spec_patch: dict[str, Any], changes: dict[str, Any], st_: TuningState) -> Inputs:
    return Inputs(spec(**spec_patch), snap(**changes), st_, T0, SETTINGS, True)


def test_a_capped_service_gets_one_move_that_pays_with_its_predicted_effect() -> None:
    d = decide(spec(**L4_256), snap(**OVERLOADED), state(problem_since=LASTED), T0)
    assert d.reason == Reason.RETUNE_BY_MODEL
    assert d.action.kind == "SetBudget" and d.applied
    key, before, after = d.action.field, d.action.from_value, d.action.to_value
    assert (key, before) == ("maxBatchedTokens", 2048)
    assert after is not None and after < before / 2  # past the x2 step of the old rules
    assert "replicas at maxReplicas 2" in d.message
    assert "in one move" in d.message and "the engine model predicts" in d.message
    assert d.state.overrides == {key: after}
    assert d.state.pending is not None and d.state.pending.to_value == after
    assert d.state.retune_cooldown_until == T0 + SETTINGS.retune_cooldown


def test_recommend_shows_the_same_move_without_making_it() -> None:
    lasted = state(problem_since=LASTED)
    auto = decide(spec(**L4_256), snap(**OVERLOADED), lasted, T0)
    advised = decide(spec(**L4_256, autotune={"mode": "Recommend"}), snap(**OVERLOADED), lasted, T0)
    assert advised.reason == Reason.RETUNE_BY_MODEL and not advised.applied
    assert advised.action == auto.action
    assert advised.message == auto.message
    assert advised.state.overrides == {} and advised.state.pending is None


UNCAPPED: dict[str, Any] = {**L4_256, "autoscaling": {"enabled": True, "maxReplicas": 4}}


def test_no_move_when_the_restarts_cost_more_than_the_gain() -> None:
    # pods that take 3 hours to load: no gain over the payback outweighs that
    slow = state(ready_time=ReadyTime(3 * 3600.0, T0 - timedelta(hours=1)))
    i = inputs(UNCAPPED, OVERLOADED, slow)
    verdict = compute_retune_move(i)
    assert verdict is not None and verdict.move is not None
    assert not verdict.move.pays and verdict.move.cost > verdict.move.gain
    assert "with a rollback's" in verdict.move.effect()
    after, decision = decide_retune(i)
    assert decision is None
    assert after.budget_blocker is not None
    assert after.budget_blocker.reason == Reason.RETUNE_DOES_NOT_PAY
    assert "does not pay" in after.budget_blocker.phrase
    # replicas can still be added: they do the work, without a restart
    d = decide(spec(**UNCAPPED), snap(**OVERLOADED), slow, T0)
    assert (d.action.kind, d.action.from_value, d.action.to_value) == ("ScaleReplicas", 2, 3)
    # at maxReplicas the x2 steps are blocked as well (they restart the same pods for less),
    # and the tuner asks whether a GPU is free (with one the rollout surges and costs nothing)
    capped = inputs(L4_256, OVERLOADED, slow)
    after, decision = decide_retune(capped)
    assert decision is None and after.asks_spare_gpu
    assert after.budget_blocker is not None
    assert after.budget_blocker.reason == Reason.RETUNE_DOES_NOT_PAY
    held = decide(spec(**L4_256), snap(**OVERLOADED), replace(slow, problem_since=LASTED), T0)
    assert (held.action.kind, held.reason) == ("Hold", Reason.AT_MAX_REPLICAS), held.message
    assert "the model's best move does not pay" in held.message  # both blockers named
    assert held.state.overrides == {}


def test_a_move_that_pays_only_with_a_surge_is_made_where_a_gpu_is_free() -> None:
    slow = state(ready_time=ReadyTime(3 * 3600.0, T0 - timedelta(hours=1)), problem_since=LASTED)
    unseen = decide(spec(**L4_256), snap(**OVERLOADED), slow, T0)
    assert unseen.asks_spare_gpu and unseen.reason != Reason.RETUNE_BY_MODEL
    none_free = decide(spec(**L4_256), snap(**OVERLOADED), slow, T0, spare_pods=0)
    assert not none_free.asks_spare_gpu and none_free.reason == unseen.reason
    free = decide(spec(**L4_256), snap(**OVERLOADED), slow, T0, spare_pods=1)
    assert free.reason == Reason.RETUNE_BY_MODEL and not free.asks_spare_gpu
    assert "none at risk in the restarts (a GPU of the type is free" in free.message
    # Recommend asks the same, from its advice pass
    advised = decide(spec(**L4_256, autotune={"mode": "Recommend"}), snap(**OVERLOADED), slow, T0)
    assert advised.asks_spare_gpu


def test_the_cluster_is_looked_at_only_for_a_move_a_surge_would_pay_for() -> None:
    looks: list[int] = []

    def observe(free: bool | None) -> Callable[[], bool | None]:
        def look() -> bool | None:
            looks.append(1)
            return free

        return look

    slow = state(ready_time=ReadyTime(3 * 3600.0, T0 - timedelta(hours=1)), problem_since=LASTED)
    args = (spec(**L4_256), snap(**OVERLOADED), slow, T0, SETTINGS, ())
    assert decide_seeing_spare_gpu(*args, observe(True)).reason == Reason.RETUNE_BY_MODEL
    for answer in (False, None):  # no free GPU, or the nodes unreadable: the first decision
        d = decide_seeing_spare_gpu(*args, observe(answer))
        assert d == decide(*args)
    assert len(looks) == 3
    quiet = (spec(**L4_256), snap(), state(), T0, SETTINGS, ())
    assert decide_seeing_spare_gpu(*quiet, observe(True)) == decide(*quiet)
    assert len(looks) == 3  # no problem, no look


def test_a_move_the_model_cannot_beat_blocks_the_x2_steps_while_replicas_remain() -> None:
    # ITL 120 ms with 64 running per pod at maxActiveSeqs 64: rule 4 would halve the cap, but the
    # model finds no budget that serves more within the SLO (3% in SLO at every value the bounds
    # allow; maxBatchedTokens 256, below them, would take 27% in: the default range reaches it)
    running = {"maxSeqs": 256, "maxActiveSeqs": 64}
    bounds = {"maxBatchedTokens": {"min": 512}}
    patch = {
        **UNCAPPED,
        "budgets": {**L4_256["budgets"], "running": running},
        "autotune": {"mode": "Auto", "bounds": bounds},
    }
    busy = {**OVERLOADED, "running": 128.0}
    i = inputs(patch, busy, state())
    verdict = compute_retune_move(i)
    assert verdict is not None and verdict.move is None
    blocked, _ = decide_retune(i)
    assert blocked.budget_blocker is not None
    assert "finds no budget that does better" in blocked.budget_blocker.phrase
    d = decide(spec(**patch), snap(**busy), state(), T0)
    assert (d.action.kind, d.reason) == ("ScaleReplicas", Reason.SCALE_UP_LATENCY), d.message
    assert d.state.overrides == {}
    # 30 running per pod: the model's move (the token budget, in one move), not a replica
    moved = decide(spec(**patch), snap(**{**busy, "running": 60.0}), state(), T0)
    assert moved.reason == Reason.RETUNE_BY_MODEL, moved.message
    assert (moved.action.field, moved.action.from_value) == ("maxBatchedTokens", 2048)


def test_no_model_run_without_a_problem_or_while_budgets_cannot_move() -> None:
    quiet = {**OVERLOADED, "itl_p95": 0.05, "running": 10.0}
    cases = [
        inputs(L4_256, quiet, state()),  # every figure within the SLO
        inputs(L4_256, OVERLOADED, state(retune_cooldown_until=T0 + timedelta(seconds=1))),
        inputs(L4_256, OVERLOADED, state(restart_times=(T0, T0))),  # 2 of 2 per hour used
        replace(inputs(L4_256, OVERLOADED, state()), autotune_acts=False),
    ]
    for i in cases:
        assert decide_retune(i) == (i, None)


def test_a_model_that_does_not_see_the_problem_leaves_it_to_the_rules() -> None:
    # an unknown model: nothing to predict with
    i = inputs({**L4_256, "model": "org/unknown-model"}, OVERLOADED, state())
    assert compute_retune_move(i) is None
    # 503s the model does not reproduce (0.2 req/s on two L4 pods): no verdict either way
    light = {**OVERLOADED, "request_rate": 0.2, "admitted_rate": 0.1, "running": 0.5,
             "rejection_ratio": 0.5, "rejection_rate": 0.1}  # fmt: skip
    i = inputs(L4_256, light, state())
    assert compute_retune_move(i) is None
    assert decide_retune(i) == (i, None)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(
    current=st.integers(1, 100_000),
    lo=st.integers(1, 5_000),
    width=st.integers(0, 50_000),
)
def test_the_values_tried_stay_inside_the_range(current: int, lo: int, width: int) -> None:
    hi = lo + width
    values = values_around(current, lo, hi)
    assert all(lo <= v <= hi and v != current for v in values)
    assert values == sorted(set(values))
    if lo != current:
        assert lo in values


@settings(derandomize=True, max_examples=25, deadline=None)
@given(
    seqs=st.sampled_from([16, 32, 64, 128, 256]),
    requests=st.integers(1, 1024),
    tokens=st.sampled_from([512, 1024, 2048, 4096, 8192]),
    key=st.sampled_from(["maxRequests", "maxActiveSeqs", "maxBatchedTokens"]),
    pick=st.floats(0.0, 1.0),
)
def test_every_move_in_range_passes_the_crd_and_vllms_start_up(
    seqs: int, requests: int, tokens: int, key: str, pick: float
) -> None:
    tokens = max(tokens, seqs)  # vLLM: max-num-batched-tokens >= max-num-seqs
    s = spec(
        **{
            **L4_256,
            "budgets": {
                "queue": {"maxRequests": requests},
                "running": {"maxSeqs": seqs, "maxActiveSeqs": None},
                "tokens": {"maxBatchedTokens": tokens},
            },
        }
    )
    window = allowed_range(s, key, SETTINGS)
    assert window is not None
    lo, hi = window
    value = lo + round(pick * (hi - lo))
    c = candidate_of(s, {key: value}, 2)
    manifest = build_service(c, model=s.model, name="x", namespace=None, target=Target(2.0, 0.1))
    assert check_service(manifest) is None
    resolve(c, packaged_catalog(), s.model)  # raises with vLLM's message if it would not start


def test_the_token_histograms_give_the_lengths_when_the_snapshot_has_them() -> None:
    # no finish rate, so no Little's-law estimate: only the histograms can give the lengths
    figures = {**OVERLOADED, "admitted_rate": None}
    assert compute_retune_move(inputs(L4_256, figures, state())) is None
    prompts = Empirical(edges=(500.0, 1000.0, 2000.0), cumulative=(0.3, 0.7, 1.0))
    outputs = Empirical(edges=(50.0, 100.0, 200.0), cumulative=(0.3, 0.7, 1.0))
    measured = {**figures, "prompt_lengths": prompts, "output_lengths": outputs}
    verdict = compute_retune_move(inputs(L4_256, measured, state()))
    assert verdict is not None and verdict.current.attainment < 1.0


def test_a_single_pod_serves_nothing_while_it_restarts() -> None:
    one = {**OVERLOADED, "request_rate": 2.5, "admitted_rate": 2.5, "pods_expected": 1,
           "pods_scraped": 1}  # fmt: skip
    ready = ReadyTime(240.0, T0 - timedelta(hours=1))
    verdict = compute_retune_move(inputs(L4_256, one, state(desired_replicas=1, ready_time=ready)))
    assert verdict is not None and verdict.move is not None
    assert verdict.move.cost == pytest.approx(verdict.current.attainment * 2.5 * 240.0)
    # two pods: the other one carries the load meanwhile, so the cost is what it then misses,
    # at most all of it (one L4 alone at 4 req/s misses the ITL SLO for nearly every request)
    two = compute_retune_move(inputs(L4_256, OVERLOADED, state(ready_time=ready)))
    assert two is not None and two.move is not None
    assert 0.0 <= two.move.cost <= two.current.attainment * 4.0 * 240.0 * 2


@pytest.mark.parametrize(
    ("gain", "cost", "surge", "pays"),
    [
        (1017.3, 976.6, False, False),  # l4-3b-gpus2 seed 8: 4% over its rollout, not its undoing
        (2000.0, 976.6, False, True),
        (1.0, 0.0, True, True),  # a surge costs nothing, undone or not
        (0.0, 0.0, True, False),
    ],
)
def test_a_pod_by_pod_move_pays_for_its_rollback_too(
    gain: float, cost: float, surge: bool, pays: bool
) -> None:
    verdict = compute_retune_move(inputs(L4_256, OVERLOADED, state()))
    assert verdict is not None and verdict.move is not None
    move = replace(verdict.move, gain=gain, cost=cost, surge=surge)
    assert move.pays is pays
    assert cost * UNDO_FACTOR < gain or not pays


def test_with_a_canary_the_rules_steps_stay_at_the_cap() -> None:
    """A step on a canary risks one pod beside the others, removed if worse: at the cap the
    rules may still try what the model would not make."""
    slow = state(ready_time=ReadyTime(3 * 3600.0, T0 - timedelta(hours=1)))
    canary = {**L4_256, "autotune": {"mode": "Auto", "maxRestartsPerHour": 2, "canary": True}}
    i = inputs(canary, OVERLOADED, slow)
    after, decision = decide_retune(i)
    assert decision is None and after.budget_blocker is None
    without = inputs(L4_256, OVERLOADED, slow)
    assert decide_retune(without)[0].budget_blocker is not None


def test_a_move_that_pays_waits_while_its_pod_by_pod_restart_would_stop_needed_pods() -> None:
    """Its sums price the restarts, but at 4 req/s on pods that serve 3 each, one pod of two
    cannot carry the load for a ready time (tuning/rollout_room.py): a surge can."""
    busy = state(problem_since=LASTED, capacity=Capacity(3.0, T0 - timedelta(minutes=10)))
    held = decide(spec(**L4_256), snap(**OVERLOADED), busy, T0)
    assert (held.action.kind, held.reason) == ("Hold", Reason.AT_MAX_REPLICAS), held.message
    assert "a pod-by-pod restart would leave 1 of 2 ready pods serving 4.00/s" in held.message
    assert held.asks_spare_gpu and held.state.overrides == {}
    surged = decide(spec(**L4_256), snap(**OVERLOADED), busy, T0, spare_pods=1)
    assert surged.reason == Reason.RETUNE_BY_MODEL
    # with a pod to spare (each serves 9/s) it rolls pod by pod, as before
    idle = replace(busy, capacity=Capacity(9.0, T0 - timedelta(minutes=10)))
    assert decide(spec(**L4_256), snap(**OVERLOADED), idle, T0).reason == Reason.RETUNE_BY_MODEL


def test_latency_is_never_bought_with_503s(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model whose best share "in the SLO" closes the valve and refuses a fifth of the
    requests: not a target. The next best, within the 503 budget, is."""

    def predict(c: Candidate, _model: str, _t: Target, _load: Workload) -> Predicted:
        if c.budget("max_num_queued_reqs") == 128:  # maxRequests 512 -> 128: 20% refused
            return Predicted(0.2, 0.5, 0.08, 1.6, 0.7)
        if c.budget("max_num_batched_tokens") == 1024:
            return Predicted(0.0, 0.9, 0.09, 1.9, 0.6)
        return Predicted(0.0, 0.7, 0.12, 1.9, 0.49)

    monkeypatch.setattr(retune_move, "predict", predict)
    d = decide(spec(**L4_256), snap(**OVERLOADED), state(problem_since=LASTED), T0, spare_pods=1)
    assert d.reason == Reason.RETUNE_BY_MODEL
    assert (d.action.field, d.action.to_value) == ("maxBatchedTokens", 1024)


@pytest.mark.parametrize(
    ("dispersion", "burst"), [(None, 1.0), (2.0, 1.0), (33.0, 16.0), (127.0, 64.0)]
)
def test_the_replayed_load_arrives_in_the_fleets_bursts(
    dispersion: float | None, burst: float
) -> None:
    """Rule 1b replays the fleet's load (each replica its round-robin share of each burst), so
    the burst is the fleet's, not one pod's; a bursty replay holds 20 bursts at least."""
    lengths = {"prompt_lengths": Empirical((100.0, 1000.0), (0.5, 1.0)),
               "output_lengths": Empirical((10.0, 100.0), (0.25, 1.0))}  # fmt: skip
    i = inputs(L4_256, {**OVERLOADED, **lengths, "arrival_dispersion": dispersion}, state())
    load = retune_move.observed_load(i)
    assert load is not None and load.rate == 4.0
    assert load.burst == pytest.approx(burst)
    # 20 bursts of 64 at 4 req/s: 320 s; of 16, fewer seconds than the plain horizon
    assert load.horizon == pytest.approx(max(retune_move.HORIZON, 20 * burst / 4.0))
    fallback = retune_move.observed_load(
        inputs(L4_256, {**OVERLOADED, "arrival_dispersion": dispersion}, state())
    )  # no token histograms: the lengths from the means, the same bursts
    assert fallback is not None and fallback.burst == pytest.approx(burst)
