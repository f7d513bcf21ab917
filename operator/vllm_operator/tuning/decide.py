"""decide(): one tuning pass. The operator's timer and the simulator's control loop both call it.

The chain, first match wins (docs/tuning.md has the thresholds):

  guards  0a nothing to do (autotune Off, autoscaling off)   HoldTuningOff
          0b replicas outside [min, max] after a spec edit   ReplicasOutOfBounds
          0c metrics not usable or older than the limit      HoldMetrics<Quality>
          0d rollout in progress or pods not ready           HoldRollout / HoldPodsNotReady
  rules   1  a budget change waiting to be judged            RetuneSettling / RetuneKept / Rollback
          2  503s over budget, TTFT without headroom         scale up
          3  503s over budget, TTFT with headroom            open the entry valve, else scale up
          4  ITL over SLO or preemptions at the active cap   lower maxActiveSeqs, else scale up
          5  ITL well under SLO, requests wait at the cap    raise maxActiveSeqs (opportunity)
          6  TTFT over SLO from prefill of long prompts      raise maxBatchedTokens, else scale up
          7  TTFT or ITL over SLO otherwise                  scale up
          8  arrivals near the learned capacity per pod      scale up ahead (opportunity)
          9  sustained low load                              scale down
          10 otherwise                                       WithinSLO

Entry problems come first because a refused request is worse than a slow one, and because fixing
the running layer first would push more requests into the queue. Rule 1 comes before every other
rule so that no budget moves while a change is being judged ("change one layer at a time"). Only
adding replicas goes through while a change settles: a fleet that overloads then cannot wait the
minutes a judgement takes, and more replicas can only make the change look better, never get it
rolled back wrongly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.tuning import guards, rules
from vllm_operator.tuning.evaluate import pending_rule
from vllm_operator.tuning.inputs import Inputs, autotune_mode
from vllm_operator.tuning.limits import label
from vllm_operator.tuning.model import Decision, MetricsSnapshot, TuningState
from vllm_operator.tuning.reasons import Reason
from vllm_operator.tuning.scaling import clamp_replicas, low_load, raised_capacity
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
    pending_rule,
    rules.rejections_without_headroom,
    rules.rejections_with_headroom,
    rules.running_too_big,
    rules.waiting_at_cap,
    rules.prefill_bound,
    rules.latency_over,
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
    rules.capacity_near,
)

_DEFAULT_SETTINGS = TuningSettings()


def decide(
    spec: VLLMServiceSpec,
    snapshot: MetricsSnapshot,
    state: TuningState,
    now: datetime,
    settings: TuningSettings = _DEFAULT_SETTINGS,
) -> Decision:
    """One pass: what to do now, and the state to remember (also when holding).

    Mode Auto applies budget moves. Mode Recommend acts exactly as Off would (replicas only,
    when autoscaling is on) and records what Auto would do: see _recommend.
    """
    base = normalize_state(state, spec, settings, now)
    mode = autotune_mode(spec)
    if mode != "Recommend":
        return _chain(Inputs(spec, snapshot, base, now, settings, mode == "Auto"))
    acting = _chain(Inputs(spec, snapshot, base, now, settings, autotune_acts=False))
    advice = _chain(Inputs(spec, snapshot, base, now, settings, autotune_acts=True))
    return _recommend(acting, advice)


def _chain(i: Inputs) -> Decision:
    # Low-load votes must be consecutive observations: a guard hold is not one, so it clears them.
    unvoted = replace(i, state=replace(i.state, scale_down_votes=0))
    for guard in GUARDS:
        decision = guard(unvoted)
        if decision is not None:
            return decision
    # usable figures from here on: what they say of capacity is learned before the rules read it
    learned = replace(unvoted, state=replace(i.state, capacity=raised_capacity(unvoted)))
    votes = i.state.scale_down_votes + 1 if low_load(learned) else 0
    voted = replace(learned, state=replace(learned.state, scale_down_votes=votes))
    for rule in RULES:
        decision = rule(voted)
        if decision is not None:
            if decision.reason == Reason.RETUNE_SETTLING:
                return _scale_up_while_settling(replace(voted, state=decision.state), decision)
            return decision
    return rules.within_slo(voted)


def _scale_up_while_settling(i: Inputs, settling: Decision) -> Decision:
    """The problem rules, run while a change settles, keep only a scale-up; else the settling hold.

    Their budget remedies are blocked by the retune cooldown, which outlasts the judgement, so
    their first remedy that can act is a scale-up when autoscaling allows one.
    """
    for rule in SCALE_UP_RULES:
        decision = rule(i)
        if decision is None:
            continue
        action = decision.action
        grows = action.kind == "ScaleReplicas" and (action.to_value or 0) > (action.from_value or 0)
        if grows:
            return replace(decision, message=f"{decision.message} ({settling.message})")
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
        advised = f"{label(proposal.field)} {proposal.from_value} -> {proposal.to_value}"
        return replace(acting, message=f"{acting.message} (autotune would set {advised})")
    if proposal.kind == "SetBudget":
        return replace(advice, applied=False, state=acting.state)
    if proposal.kind == "Hold":
        return replace(advice, state=acting.state)
    return acting
