"""Every reason a tuning decision can give, with what it means and the action it goes with.

The values are the wire: status.tuning.lastDecisions[].reason, the TuningActive condition's
reason, the Events the tuner emits and the `reason` label of vllm_operator_decisions_total.
docs/tuning.md's reason table is generated from this list (tools/gen_docs.py); a reason that is
not here cannot be decided (mypy), so the table cannot miss one.

A *blocker* (a lever that cannot move) becomes the reason of the hold a problem rule ends in
when none of its remedies can act (outcome.py).
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllm_operator.tuning.model import ActionKind


class Reason(StrEnum):
    """A decision's reason: CamelCase value, the action kind it comes with, one-line meaning."""

    kind: ActionKind
    meaning: str

    def __new__(cls, value: str, kind: ActionKind, meaning: str) -> Reason:
        member = str.__new__(cls, value)
        member._value_ = value
        member.kind = kind
        member.meaning = meaning
        return member

    # rule 0: guards
    HOLD_TUNING_OFF = "HoldTuningOff", "Hold", "autotune Off and autoscaling off: nothing to tune"
    REPLICAS_OUT_OF_BOUNDS = (
        "ReplicasOutOfBounds",
        "ScaleReplicas",
        "replicas outside [minReplicas, maxReplicas] after a spec edit: moved inside at once",
    )
    HOLD_METRICS_MISSING = "HoldMetricsMissing", "Hold", "no engine samples for the service's pods"
    HOLD_METRICS_STALE = (
        "HoldMetricsStale",
        "Hold",
        "the newest samples, or the snapshot itself, are older than the staleness limit",
    )
    HOLD_METRICS_PARTIAL = "HoldMetricsPartial", "Hold", "some expected pods were not scraped"
    HOLD_METRICS_INVALID = (
        "HoldMetricsInvalid",
        "Hold",
        "Prometheus gave figures that cannot be used",
    )
    HOLD_METRICS_ERROR = "HoldMetricsError", "Hold", "a Prometheus query failed"
    HOLD_ROLLOUT = "HoldRollout", "Hold", "a rollout is under way: figures describe a mixed fleet"
    HOLD_PODS_NOT_READY = "HoldPodsNotReady", "Hold", "fewer pods ready than the Deployment asks"
    # rule 1: judging a budget change
    RETUNE_SETTLING = (
        "RetuneSettling",
        "Hold",
        "a budget change waits for fresh figures before it is judged",
    )
    RETUNE_KEPT = (
        "RetuneKept",
        "Hold",
        "a budget change was judged no worse (or worse only as traffic rose): it stays",
    )
    ROLLBACK_WORSE = (
        "RollbackWorse",
        "Rollback",
        "a budget change made a figure clearly worse: the previous value is restored",
    )
    # a budget change on a canary pod (tuning/canary.py, spec.autotune.canary)
    CANARY_STARTED = (
        "CanaryStarted",
        "SetBudget",
        "a budget change runs on one canary pod first, beside the stable pods",
    )
    CANARY_JUDGING = (
        "CanaryJudging",
        "Hold",
        "the canary waits to be ready, for fresh figures or for traffic before it is judged",
    )
    CANARY_PROMOTED = (
        "CanaryPromoted",
        "SetBudget",
        "the canary was no worse than the stable pods: the change goes to every pod",
    )
    CANARY_REMOVED = (
        "CanaryRemoved",
        "Rollback",
        "the canary was clearly worse than the stable pods (or could not be judged): removed",
    )
    # the engine model's one-step budget move (tuning/retune_move.py)
    RETUNE_BY_MODEL = (
        "RetuneByModel",
        "SetBudget",
        "a problem the engine model predicts one budget move fixes, worth more than its restarts",
    )
    RETUNE_AHEAD = (
        "RetuneAhead",
        "SetBudget",
        "the forecast needs pods the replica cap denies; one budget move carries it, with surge",
    )
    RETUNE_FOR_FEWER_PODS = (
        "RetuneForFewerPods",
        "SetBudget",
        "the SLO met; one budget move meets it on fewer pods, saving more GPU time than it spends",
    )
    RETUNE_FOR_CAPACITY = (
        "RetuneForCapacity",
        "SetBudget",
        "no pod to save, the replica lever capped; one budget move raises what each pod serves, "
        "with surge",
    )
    # rules 2-9: what the tuner changes
    SCALE_UP_REJECTIONS = (
        "ScaleUpRejections",
        "ScaleReplicas",
        "503s over budget: one step more replicas",
    )
    RAISE_QUEUE_REJECTIONS = (
        "RaiseQueueRejections",
        "SetBudget",
        "503s over budget with TTFT headroom: the refusing entry valve is raised",
    )
    LOWER_ACTIVE_SEQS_ITL = (
        "LowerActiveSeqsITL",
        "SetBudget",
        "ITL p95 over SLO: maxActiveSeqs is lowered so the running batch shrinks",
    )
    LOWER_ACTIVE_SEQS_PREEMPTION = (
        "LowerActiveSeqsPreemption",
        "SetBudget",
        "preemptions at the active cap: maxActiveSeqs is lowered",
    )
    SCALE_UP_LATENCY = (
        "ScaleUpLatency",
        "ScaleReplicas",
        "TTFT or ITL p95 over SLO: one step more replicas",
    )
    RAISE_ACTIVE_SEQS_WAITING = (
        "RaiseActiveSeqsWaiting",
        "SetBudget",
        "ITL well under SLO while requests wait at the cap: maxActiveSeqs is raised",
    )
    RAISE_BATCHED_TOKENS_TTFT = (
        "RaiseBatchedTokensTTFT",
        "SetBudget",
        "TTFT over SLO from prefill of long prompts: maxBatchedTokens is raised",
    )
    SCALE_UP_NEAR_CAPACITY = (
        "ScaleUpNearCapacity",
        "ScaleReplicas",
        "arrivals near the trusted capacity per pod: the replicas it says the present needs",
    )
    SCALE_UP_FORECAST = (
        "ScaleUpForecast",
        "ScaleReplicas",
        "arrivals forecast a pod ready time ahead exceed capacity x headroom: scale to them",
    )
    SCALE_DOWN_LOW_LOAD = (
        "ScaleDownLowLoad",
        "ScaleReplicas",
        "sustained low load: one step fewer replicas",
    )
    WITHIN_SLO = "WithinSLO", "Hold", "every figure within its SLO: nothing to do"
    # blockers: the hold of a problem rule whose remedies cannot act
    AUTOSCALING_OFF = "AutoscalingOff", "Hold", "blocker: autoscaling is off"
    AUTOTUNE_OFF = "AutotuneOff", "Hold", "blocker: autotune is not Auto, budgets do not move"
    AT_MAX_REPLICAS = "AtMaxReplicas", "Hold", "blocker: replicas at maxReplicas"
    NO_FREE_GPU = (
        "NoFreeGPU",
        "Hold",
        "blocker: pods unschedulable, no node has a free GPU of the type: a budget move may act",
    )
    AT_MIN_REPLICAS = (
        "AtMinReplicas",
        "Hold",
        "blocker: replicas at minReplicas (low load then ends in WithinSLO)",
    )
    SCALE_UP_COOLDOWN = (
        "ScaleUpCooldown",
        "Hold",
        "blocker: replicas changed within the scale-up cooldown",
    )
    SCALE_DOWN_VOTING = (
        "ScaleDownVoting",
        "Hold",
        "blocker: low load for fewer consecutive passes than the votes needed",
    )
    SCALE_DOWN_STABILIZING = (
        "ScaleDownStabilizing",
        "Hold",
        "blocker: replicas changed within the scale-down stabilisation",
    )
    RETUNE_COOLDOWN = (
        "RetuneCooldown",
        "Hold",
        "blocker: the last budget change is within the retune cooldown",
    )
    RESTART_BUDGET_EXHAUSTED = (
        "RestartBudgetExhausted",
        "Hold",
        "blocker: maxRestartsPerHour budget changes already made in the last hour",
    )
    HOLD_AFTER_ROLLBACK = (
        "HoldAfterRollback",
        "Hold",
        "blocker: the field may not move in the direction a rollback undid",
    )
    BUDGET_UNSET = "BudgetUnset", "Hold", "blocker: the spec leaves the budget unset"
    BUDGET_AT_BOUND = "BudgetAtBound", "Hold", "blocker: the budget is at its bound"
    RETUNE_AWAITS_WINDOW = (
        "RetuneAwaitsWindow",
        "Hold",
        "blocker: replicas capped, the problem younger than a metrics window: a budget move waits",
    )
    RETUNE_DOES_NOT_PAY = (
        "RetuneDoesNotPay",
        "Hold",
        "blocker: the engine model's best budget move gains less than its restarts cost",
    )
    KV_CACHE_FULL = (
        "KVCacheFull",
        "Hold",
        "blocker: KV cache usage leaves no room to admit more requests",
    )
    NEW_PODS_SUFFICE = (
        "NewPodsSuffice",
        "Hold",
        "blocker: the latency miss predates the pods last added, which serve the forecast",
    )
    ROLLOUT_NEEDS_PODS = (
        "RolloutNeedsPods",
        "Hold",
        "blocker: no GPU free for a surge pod, and the load needs every pod a restart would stop",
    )
    NEW_BUDGETS_SUFFICE = (
        "NewBudgetsSuffice",
        "Hold",
        "blocker: the miss predates the budgets in force on every pod, which serve the forecast",
    )
