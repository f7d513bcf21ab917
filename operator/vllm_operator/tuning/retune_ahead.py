"""Rule 8c: a budget move ahead of a load that the capped replica lever cannot carry.

Rule 8 adds pods a ready time before the forecast load needs them. Where the replica lever is
capped (maxReplicas, or pods Unschedulable for want of a GPU) it cannot, and rule 1b moves the
budgets only once the figures show the problem: at the peak, after the windows it fills are
lost, and its rollout then takes another ready time. On a service capped at 2 L4s under a
diurnal peak that needs 3 (bench l4-3b-cap2/diurnal) rule 1b's move came at minute 29, and the
same move made before the peak holds 2 pods in the SLO for 90% of the hour's windows where the
spec's budgets hold 77% (docs/benchmarks.md). This rule makes the move before the miss, while
the fleet still meets its SLO, when all of these hold:

- the forecast one ready time ahead needs more pods than the fleet has (rule 8's sizing with
  the trusted capacity, tuning/capacity.py), and replicas are capped;
- the engine model (rule 1b's replay, retune_move.py) replays the observed workload at the
  forecast rate over `forecast_headroom` (the load the replica lever sizes for, rounded up to a
  9% step so that passes share replays: retune_pods.sized_load) on the fleet's pods, and
  predicts the budgets in force outside the SLO there;
- its best one-field move (rule 1b's grid, within autotune.bounds and vLLM's cross-field rules,
  never refusing more than the 503 budget: retune_move.best_move) brings MIN_GAIN more of those
  requests into the SLO, and replayed at the present rate keeps as many of today's requests in
  it (less MIN_GAIN): the present is not traded for a forecast;
- a GPU of the type is free, so the rollout surges: a new pod is ready before an old one stops,
  and the move costs no request. Ahead of a miss, while the load climbs, no move is worth a
  pod's capacity; without a free GPU the budgets stay, and rule 1b (with its rollout-room check,
  rollout_room.py) judges once the problem shows.

It spends one of the hour's restarts (autotune.maxRestartsPerHour), and rule 1 judges it like
any other change (a figure that worsened while the load rose says nothing against it).
"""

from __future__ import annotations

from dataclasses import replace

from vllm_operator.planning.candidate import Candidate
from vllm_operator.tuning.capacity import trusted_capacity
from vllm_operator.tuning.forecast import forecast, forecast_phrase, rising
from vllm_operator.tuning.inputs import Inputs
from vllm_operator.tuning.limits import apply_budget, retune_blocker
from vllm_operator.tuning.model import Decision
from vllm_operator.tuning.outcome import Move, act
from vllm_operator.tuning.problem_wait import has_problem, replicas_capped
from vllm_operator.tuning.reasons import Reason
from vllm_operator.tuning.retune_move import (
    MIN_GAIN,
    Predicted,
    best_move,
    candidate_of,
    model_knows,
    observed_load,
    predict,
    slo_target,
    within,
)
from vllm_operator.tuning.retune_pods import sized_load
from vllm_operator.tuning.scaling import forecast_pods


def decide_retune_ahead(i: Inputs) -> tuple[Inputs, Decision | None]:
    """8c. The move ahead of the capped forecast (module doc), else None. A move whose rollout
    needs a free GPU, in a pass that has not looked for one, returns `i` asking for it
    (Inputs.asks_spare_gpu): the handler looks and decides again."""
    if not i.autotune_acts or not i.rates_trusted or has_problem(i):
        return i, None
    if i.state.pending is not None or i.state.canary is not None or retune_blocker(i) is not None:
        return i, None
    capped, known, ahead = replicas_capped(i), trusted_capacity(i), forecast(i)
    if capped is None or known is None or ahead is None or not rising(ahead):
        return i, None
    need = forecast_pods(i, ahead.rate, known.per_pod)
    if need <= i.replicas or not model_knows(i):
        return i, None
    base, target = observed_load(i), slo_target(i)
    if base is None or target is None:
        return i, None
    model, present, sized = i.spec.model, base, sized_load(base, i, ahead.rate)
    in_force = candidate_of(i.spec, i.state.overrides, i.pods)
    current, today = predict(in_force, model, target, sized), predict(in_force, model, target,
                                                                      present)  # fmt: skip
    if current is None or today is None or within(current, target):
        return i, None  # the model sees the budgets in force carry the forecast: nothing to move

    def keeps_today(c: Candidate, _p: Predicted) -> bool:
        now = predict(c, model, target, present)
        return now is not None and now.attainment >= today.attainment - MIN_GAIN

    best = best_move(i, target, sized, current, keeps_today)
    if best is None:
        return i, None
    if i.spare_gpu is not True:  # its rollout must surge (module doc)
        return replace(i, asks_spare_gpu=i.spare_gpu is None), None
    key, value, predicted = best
    from_value = i.budget(key)
    assert from_value is not None
    applied = apply_budget(i, key, from_value, value)
    effect = (
        f"the engine model predicts at {sized.rate:.2f}/s {predicted.phrase()}, against "
        f"{current.phrase()} with the budgets in force; a GPU of the type is free: the rollout "
        "surges"
    )
    step = Move(applied.action, applied.state, f"{applied.phrase} in one move ({effect})")
    diagnosis = f"{forecast_phrase(ahead)} needs {need} replicas, {capped}"
    return i, act(Reason.RETUNE_AHEAD, diagnosis, step, i.snapshot)
