"""decide(): one tuning pass. The operator's timer and the simulator's control loop both call it.

The chain, first match wins (docs/tuning.md has the thresholds):

  guards  0a nothing to do (autotune Off, autoscaling off)   HoldTuningOff
          0b replicas outside [min, max] after a spec edit   ReplicasOutOfBounds
          0c metrics not usable or older than the limit      HoldMetrics<Quality>
          0d rollout in progress or pods not ready           HoldRollout / HoldPodsNotReady
  rules   1  a budget change waiting to be judged            RetuneSettling / RetuneKept / Rollback
          1b a problem, and the engine model's best budget   RetuneByModel (one move to the
             move pays for its restarts (retune_move.py)     target), or RetuneDoesNotPay
                                                             blocks the x2 budget remedies below
          2  503s over budget, TTFT without headroom         scale up
          3  503s over budget, TTFT with headroom            open the entry valve, else scale up
          4  ITL over SLO or preemptions at the active cap   lower maxActiveSeqs, else scale up
          5  ITL well under SLO, requests wait at the cap    raise maxActiveSeqs (opportunity)
          6  TTFT over SLO from prefill of long prompts      raise maxBatchedTokens, else scale up
          7  TTFT or ITL over SLO otherwise                  scale up
          8  arrivals forecast a ready time ahead need more  scale up to what they need
          8b arrivals near the trusted capacity per pod      scale up ahead to what it needs
          8c the forecast needs pods the replica cap denies, RetuneAhead (one move, rolled
             and one budget move carries it (retune_ahead.py) with surge on a free GPU)
          9  sustained low load                              scale down
          9b the SLO met, and one budget move meets it on    RetuneForFewerPods, when the pods
             fewer pods (retune_pods.py)                     saved outweigh the rollout's GPU time
             ... at minReplicas: one move raises what        RetuneForCapacity, by the same sums
             every pod serves
          10 otherwise                                       WithinSLO

Entry problems come first because a refused request is worse than a slow one, and because fixing
the running layer first would push more requests into the queue. Rule 1 comes before every other
rule so that no budget moves while a change is being judged ("change one layer at a time"). Only
adding replicas goes through while a change settles: a fleet that overloads then cannot wait the
minutes a judgement takes, and more replicas can only make the change look better, never get it
rolled back wrongly.

Every pass first folds what it observed into the state (forecast.py: the pods' ready time, the
arrival rate for the trend). Pods the tuner asked for that still load are coming, not a reason
to hold: while they load, the holds of 0c/0d (partial metrics, pods not ready) let rule 8 add
what the forecast needs beyond them, and otherwise say what the forecast expects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import cast

from vllm_operator.api.budgets import BudgetKey, budget_change
from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.tuning import guards, rules
from vllm_operator.tuning.capacity import model_estimate, trusted_capacity
from vllm_operator.tuning.evaluate import pending_rule
from vllm_operator.tuning.forecast import forecast, forecast_phrase, observe, pods_coming
from vllm_operator.tuning.inputs import Inputs, autotune_mode
from vllm_operator.tuning.model import CapacityEstimate, Decision, MetricsSnapshot, TuningState
from vllm_operator.tuning.problem_wait import stamp_problem
from vllm_operator.tuning.reasons import Reason
from vllm_operator.tuning.retune_ahead import decide_retune_ahead
from vllm_operator.tuning.retune_move import decide_retune
from vllm_operator.tuning.retune_pods import decide_fewer_pods
from vllm_operator.tuning.scaling import (
    clamp_replicas,
    low_load,
    new_budgets_suffice,
    raised_capacity,
)
from vllm_operator.tuning.settings import TuningSettings
from vllm_operator.tuning.state import normalize_state

Rule = Callable[[Inputs], Decision | None]

GUARDS: tuple[Rule, ...] = (
    guards.nothing_to_do,
    clamp_replicas,
    guards.metrics_unusable,
    guards.fleet_unsteady,
)
RULES: tuple[Rule, ...] = (
    rules.rejections_without_headroom,
    rules.rejections_with_headroom,
    rules.running_too_big,
    rules.waiting_at_cap,
    rules.prefill_bound,
    rules.latency_over,
    rules.forecast_over,
    rules.capacity_near,
    rules.low_load_rule,
)

# The rules whose remedies include adding replicas (not rule 5, a budget opportunity; not 9).
SCALE_UP_RULES: tuple[Rule, ...] = (
    rules.rejections_without_headroom,
    rules.rejections_with_headroom,
    rules.running_too_big,
    rules.prefill_bound,
    rules.latency_over,
    rules.forecast_over,
    rules.capacity_near,
)
# The holds a fleet whose asked-for pods still load ends in: the forecast may act through them.
_LOADING_HOLDS = (Reason.HOLD_METRICS_PARTIAL, Reason.HOLD_PODS_NOT_READY)

_DEFAULT_SETTINGS = TuningSettings()


def decide(
    spec: VLLMServiceSpec,
    snapshot: MetricsSnapshot,
    state: TuningState,
    now: datetime,
    settings: TuningSettings = _DEFAULT_SETTINGS,
    capacities: tuple[CapacityEstimate, ...] = (),
    spare_pods: int | None = None,
    may_look: bool = True,
) -> Decision:
    """One pass: what to do now, and the state to remember (also when holding).

    Mode Auto applies budget moves. Mode Recommend acts exactly as Off would (replicas only,
    when autoscaling is on) and records what Auto would do: see _recommend. `capacities`:
    per-pod capacity estimates from other sources than this fleet's observations: the engine
    model's (tuning/model_capacity.py), which tuning/capacity.py weighs against the observed one.
    """
    base = normalize_state(state, spec, settings, now)
    mode = autotune_mode(spec)

    def inputs(acts: bool) -> Inputs:
        return Inputs(
            spec, snapshot, base, now, settings, acts, capacities, spare_pods=spare_pods,
            may_look=may_look,
        )  # fmt: skip

    if mode != "Recommend":
        return _chain(inputs(mode == "Auto"))
    acting, advice = _chain(inputs(False)), _chain(inputs(True))
    out = _recommend(acting, advice)
    # the advice's look for fewer pods is remembered, or Recommend would look on every pass
    looked = replace(out.state, fewer_pods_looked_at=advice.state.fewer_pods_looked_at)
    return replace(
        out, state=looked, asks_spare_gpu=advice.asks_spare_gpu, asks_look=advice.asks_look
    )


def decide_seeing_spare_gpu(
    spec: VLLMServiceSpec,
    snapshot: MetricsSnapshot,
    state: TuningState,
    now: datetime,
    settings: TuningSettings,
    capacities: tuple[CapacityEstimate, ...],
    observe_spare_pods: Callable[[], int | None],
    take_look: Callable[[], bool] | None = None,
) -> Decision:
    """`decide`, and once more seeing the free GPUs when the engine model's move pays only if
    its rollout surges. `observe_spare_pods` (the caller's read of the nodes and pods, or the
    bench's count: the surge pods the free GPUs place) is called only then: most passes have no
    such move, and a pass at 1,000 services must not list the cluster's pods each time.

    `take_look` (the operator's look budget, tuning/look_budget.py) is asked only when the
    service is due for rule 9b's look, which is then made in a second decide; when the budget
    says no, the pass decides without it and the service stays due. None: every look is made."""
    look = take_look is None
    decision = decide(spec, snapshot, state, now, settings, capacities, may_look=look)
    if decision.asks_look and take_look is not None and take_look():
        look = True
        decision = decide(spec, snapshot, state, now, settings, capacities)
    if not decision.asks_spare_gpu:
        return decision
    spare = observe_spare_pods()
    if not spare:
        return decision
    return decide(spec, snapshot, state, now, settings, capacities, spare_pods=spare, may_look=look)


def _chain(i: Inputs) -> Decision:
    observed = observe(i)
    decision = _rules(observed)
    # the source as the pass's last state has it (a miss in this pass teaches a capacity)
    trusted = trusted_capacity(replace(observed, state=decision.state))
    return replace(
        decision,
        forecast=forecast(observed),
        model_capacity=model_estimate(observed),
        capacity_source=None if trusted is None else trusted.source,
    )


def _rules(i: Inputs) -> Decision:
    # Low-load votes must be consecutive observations: a guard hold is not one, so it clears them.
    unvoted = replace(i, state=replace(i.state, scale_down_votes=0))
    for guard in GUARDS:
        decision = guard(unvoted)
        if decision is not None:
            return _ahead_of_coming(unvoted, decision)
    # usable figures from here on: what they say of capacity is learned before the rules read it
    learned = replace(unvoted, state=replace(i.state, capacity=raised_capacity(unvoted)))
    votes = i.state.scale_down_votes + 1 if low_load(learned) else 0
    voted = stamp_problem(replace(learned, state=replace(learned.state, scale_down_votes=votes)))
    judged = pending_rule(voted)
    if judged is not None:
        if judged.reason == Reason.RETUNE_SETTLING:
            return _scale_up_while_settling(replace(voted, state=judged.state), judged)
        return judged
    voted, moved = decide_retune(voted)
    if moved is not None:
        return moved
    decision = next((d for d in (rule(voted) for rule in RULES) if d is not None), None)
    if decision is None:
        voted, decision = decide_retune_ahead(voted)
    if decision is None:
        voted, decision = decide_fewer_pods(voted)
    return replace(
        _with_verdict(voted, decision or rules.within_slo(voted)),
        asks_spare_gpu=voted.asks_spare_gpu or (decision is not None and decision.asks_spare_gpu),
        asks_look=voted.asks_look,
    )


def _with_verdict(i: Inputs, decision: Decision) -> Decision:
    """A hold says why the engine model made no budget move, also when no rule asked for one."""
    blocker = i.budget_blocker
    if blocker is None or decision.action.kind != "Hold" or blocker.phrase in decision.message:
        return decision
    return replace(decision, message=f"{decision.message}; {blocker.phrase}")


def _ahead_of_coming(i: Inputs, held: Decision) -> Decision:
    """A hold while asked-for pods load: rule 8 may still add what the forecast needs."""
    coming = pods_coming(i)
    fresh = (i.now - i.snapshot.observed_at) <= i.settings.staleness_limit
    if held.reason not in _LOADING_HOLDS or coming < 1 or not fresh:
        return held
    coming_phrase = f"{coming} asked-for pod{'s' if coming > 1 else ''} coming"
    ahead = rules.forecast_over(replace(i, state=held.state))
    if ahead is not None:
        return replace(ahead, message=f"{ahead.message} ({coming_phrase})")
    expected = forecast(i)
    tail = "" if expected is None else f"; {forecast_phrase(expected)}"
    return replace(held, message=f"{held.message} ({coming_phrase}{tail})")


def _scale_up_while_settling(i: Inputs, settling: Decision) -> Decision:
    """The problem rules, run while a change settles, keep only a scale-up; else the settling hold.

    Their budget remedies are blocked by the retune cooldown, which outlasts the judgement, so
    their first remedy that can act is a scale-up when autoscaling allows one; a miss from before
    the change reached every pod adds none where the capacity for the budgets in force says the
    fleet serves the forecast (scaling.new_budgets_suffice), and the hold says so.
    """
    for rule in SCALE_UP_RULES:
        decision = rule(i)
        if decision is None:
            continue
        action = decision.action
        grows = action.kind == "ScaleReplicas" and (action.to_value or 0) > (action.from_value or 0)
        if grows:
            return replace(decision, message=f"{decision.message} ({settling.message})")
        if new_budgets_suffice(i) is not None:  # say why the miss adds no pod
            return replace(settling, message=f"{settling.message}; {decision.message}")
        return settling
    return settling


def _recommend(acting: Decision, advice: Decision) -> Decision:
    """Recommend: replicas move as in mode Off; budgets never do.

    * A replica change (or any non-hold) of the acting pass is the decision; when Auto would have
      changed a budget instead, the message says which change it advises.
    * Otherwise, when Auto would change a budget, that change is the decision with applied=False.
    * Otherwise Auto's hold, which names the budget blocker (a bound, the cooldown) if there is one.
    The state is always the acting pass's: votes and replicas move, overrides, cooldown, restart
    times, pending judgement and holds do not.
    """
    proposal = advice.action
    if acting.action.kind != "Hold":
        if proposal.kind != "SetBudget" or proposal.field is None:
            return acting
        field = cast(BudgetKey, proposal.field)  # a SetBudget's field is a budget (model.Action)
        advised = budget_change(field, proposal.from_value, proposal.to_value)
        return replace(acting, message=f"{acting.message} (autotune would set {advised})")
    if proposal.kind == "SetBudget":
        return replace(advice, applied=False, state=acting.state)
    if proposal.kind == "Hold":
        return replace(advice, state=acting.state)
    return acting
