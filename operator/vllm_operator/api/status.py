"""VLLMService v1alpha1 `status` models. Every field is optional: writers fill what they know."""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

from pydantic import Field

from vllm_operator.api.base import INT32_MAX, StatusModel
from vllm_operator.api.budgets import BUDGET_FIELDS
from vllm_operator.api.budgets import BudgetValues as BudgetValues

MAX_DECISIONS: Final = 10
MAX_RESTART_TIMES: Final = 64
MAX_WINDOW_SAMPLES: Final = 64
MAX_HOLDS: Final = 2 * len(BUDGET_FIELDS)  # one per budget field and direction


class Condition(StatusModel):
    type: str = Field(description="Ready, Progressing, Degraded, Stalled, TuningActive, ...")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str | None = Field(default=None, description="CamelCase reason for the status.")
    message: str | None = Field(default=None, description="One human sentence.")
    observed_generation: int | None = Field(
        default=None, description="metadata.generation this condition was computed for."
    )
    last_transition_time: datetime | None = Field(
        default=None, description="When status last changed."
    )


class EffectiveStatus(StatusModel):
    args: list[str] = Field(
        default_factory=list, description="The exact container args the pods run."
    )
    image: str | None = Field(default=None, description="The image the pods run.")
    budgets: BudgetValues | None = Field(
        default=None, description="Budgets the args imply (spec values or tuning overrides)."
    )
    tensor_parallel_size: int | None = Field(default=None, description="Tensor parallel size.")
    pipeline_parallel_size: int | None = Field(default=None, description="Pipeline parallel size.")
    spec_hash: str | None = Field(
        default=None, description="The pod template hash label of the rendered Deployment."
    )


class MetricsStatus(StatusModel):
    """Last observed figures over all replicas; absent when not measured."""

    window: str | None = Field(default=None, description="Range the figures cover, e.g. 5m.")
    observed_at: datetime | None = Field(default=None, description="When they were queried.")
    request_rate: float | None = Field(default=None, description="Requests per second.")
    rejection_rate: float | None = Field(
        default=None, description="Requests refused with 503 per second."
    )
    rejection_ratio: float | None = Field(
        default=None, description="Share of requests refused with 503."
    )
    ttft_p95_seconds: float | None = Field(
        default=None, description="95th percentile time to first token."
    )
    itl_p95_seconds: float | None = Field(
        default=None, description="95th percentile inter-token latency."
    )
    e2e_p95_seconds: float | None = Field(
        default=None, description="95th percentile end-to-end request latency."
    )
    waiting_requests: float | None = Field(
        default=None, description="Mean requests waiting, summed over replicas."
    )
    running_requests: float | None = Field(
        default=None, description="Mean requests running, summed over replicas."
    )
    kv_cache_usage: float | None = Field(
        default=None, description="Mean KV cache usage fraction across replicas."
    )
    preemption_rate: float | None = Field(default=None, description="Preemptions per second.")
    prompt_tokens_rate: float | None = Field(default=None, description="Prompt tokens per second.")
    generation_tokens_rate: float | None = Field(
        default=None, description="Generated tokens per second."
    )


class TuningDecisionRecord(StatusModel):
    time: datetime = Field(description="When the decision was taken.")
    action: str = Field(description="What was decided, e.g. ScaleReplicas, SetBudget, Hold.")
    reason: str = Field(description="CamelCase reason.")
    message: str | None = Field(default=None, description="One human sentence.")
    field: str | None = Field(
        default=None, description="Budget field or replicas, when the decision changes one."
    )
    from_value: int | None = Field(default=None, description="Value before.")
    to_value: int | None = Field(default=None, description="Value after.")
    applied: bool | None = Field(
        default=None, description="False when only recommended (autotune mode Recommend)."
    )
    figures: dict[str, float] = Field(
        default_factory=dict, description="The measured figures that triggered the decision."
    )


class WindowSample(StatusModel):
    time: datetime = Field(description="When the sample was taken.")
    figures: dict[str, float] = Field(default_factory=dict, description="Measured figures.")


class TuningHold(StatusModel):
    """A direction the tuner may not move a budget in, after rolling a change back."""

    field: str = Field(description="Budget field, e.g. maxActiveSeqs.")
    direction: Literal["up", "down"] = Field(description="up or down.")
    until: datetime = Field(description="When the hold ends.")


class PendingRetuneStatus(StatusModel):
    """A budget change not yet judged against the figures before it."""

    field: str = Field(description="Budget field that was changed.")
    from_value: int | None = Field(default=None, description="Value before; absent when unset.")
    to_value: int = Field(description="Value set.")
    applied_at: datetime = Field(description="When the change was applied.")
    settled_at: datetime | None = Field(
        default=None, description="When the rollout was first seen done; judging starts then."
    )
    before: dict[str, float] = Field(
        default_factory=dict, description="Figures measured before the change."
    )


class CanaryStatus(StatusModel):
    """A budget change running on one canary pod, judged against the stable pods."""

    field: str = Field(description="Budget field the canary changes.")
    from_value: int | None = Field(
        default=None, description="Value on the stable pods; absent when unset."
    )
    to_value: int = Field(description="Value on the canary pod.")
    started_at: datetime = Field(description="When the canary was started.")
    ready_at: datetime | None = Field(
        default=None, description="When its pod was first seen ready; judging starts then."
    )


class CapacityStatus(StatusModel):
    """What one pod was seen to serve within the SLO (docs/tuning.md, rule 8)."""

    per_pod: float = Field(
        ge=0,
        description=(
            "Requests per second per pod at which a scale-up for a missed SLO last fired, or a "
            "higher rate since served with headroom."
        ),
    )
    learned_at: datetime = Field(
        description="When it was learned or raised; it is forgotten an hour later."
    )


class ModelCapacityStatus(StatusModel):
    """What one pod serves within the SLO by the calibrated engine model (docs/tuning.md,
    "Capacity")."""

    per_pod: float = Field(
        ge=0,
        description=(
            "Requests per second per pod the engine model finds within the SLO, with the "
            "budgets in force, for the workload the service sees."
        ),
    )
    workload: str | None = Field(
        default=None,
        description="The workload bucket it was computed for (prompt and output lengths).",
    )
    computed_at: datetime | None = Field(
        default=None, description="The time of the snapshot it was computed from."
    )


class ReadyTimeStatus(StatusModel):
    """How long this service's pods take from creation to Ready (docs/tuning.md, "Forecast")."""

    seconds: float = Field(ge=0, description="The longest creation-to-Ready time seen.")
    learned_at: datetime = Field(description="When pods that were Ready last showed it.")


class ForecastStatus(StatusModel):
    """The arrivals the last pass expected one pod ready time ahead (docs/tuning.md)."""

    request_rate: float = Field(ge=0, description="Requests/s expected at the horizon.")
    current_rate: float = Field(ge=0, description="Requests/s over the metrics window now.")
    trend_per_minute: float = Field(
        description="Least-squares change of the arrival rate, requests/s per minute."
    )
    horizon_seconds: float = Field(ge=0, description="How far ahead: the pod ready time used.")
    ready_time_source: Literal["learned", "default"] = Field(
        description="learned from the service's pods, or the default before any was Ready."
    )
    past_period_rate: float | None = Field(
        default=None,
        ge=0,
        description=(
            "Requests/s the last traffic period (spec.autoscaling.forecastPeriod) peaked at over "
            "the horizon, at today's level; set only when the last minutes followed that shape, "
            "and then the forecast."
        ),
    )


class TuningStatus(StatusModel):
    mode: str | None = Field(default=None, description="Autotune mode in force.")
    overrides: BudgetValues | None = Field(
        default=None, description="Budget values in force that differ from spec."
    )
    desired_replicas: int | None = Field(default=None, description="Replicas the tuner wants.")
    last_evaluated: datetime | None = Field(default=None, description="Last tuning pass.")
    last_decisions: list[TuningDecisionRecord] = Field(
        default_factory=list,
        max_length=MAX_DECISIONS,
        description="Most recent decisions, newest last.",
    )
    restarts_in_last_hour: int | None = Field(
        default=None, description="Budget changes (pod restarts) in the last hour."
    )
    restart_times: list[datetime] = Field(
        default_factory=list,
        max_length=MAX_RESTART_TIMES,
        description="When budget changes were applied, newest last.",
    )
    cooldown_until: datetime | None = Field(
        default=None, description="No budget change before this time."
    )
    last_scale_time: datetime | None = Field(
        default=None, description="When the tuner last changed replicas."
    )
    last_scale_from: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description=(
            "Replicas before the tuner's last change: after a scale-up, a latency miss in a "
            "metrics window older than the new pods may be theirs to fix (NewPodsSuffice)."
        ),
    )
    scale_down_votes: int | None = Field(
        default=None, description="Consecutive low-load passes (a scale down needs several)."
    )
    pending: PendingRetuneStatus | None = Field(
        default=None, description="A budget change awaiting judgement (kept or rolled back)."
    )
    holds: list[TuningHold] = Field(
        default_factory=list,
        max_length=MAX_HOLDS,
        description="Directions a budget may not move in, after a rollback.",
    )
    capacity: CapacityStatus | None = Field(
        default=None,
        description="Learned per-pod capacity: scale up near it, scale down only below it.",
    )
    model_capacity: ModelCapacityStatus | None = Field(
        default=None, description="The engine model's per-pod capacity, last pass."
    )
    capacity_source: Literal["observed", "model"] | None = Field(
        default=None,
        description=(
            "Which capacity the last pass sized with: observed (status.tuning.capacity) or "
            "model (status.tuning.modelCapacity)."
        ),
    )
    canary: CanaryStatus | None = Field(
        default=None,
        description=(
            "The budget change running on the canary pod; its verdict is the newest "
            "CanaryPromoted or CanaryRemoved decision."
        ),
    )
    ready_time: ReadyTimeStatus | None = Field(
        default=None, description="Learned pod ready time: the forecast's horizon."
    )
    forecast: ForecastStatus | None = Field(
        default=None, description="Arrivals expected one pod ready time ahead, last pass."
    )
    problem_since: datetime | None = Field(
        default=None,
        description=(
            "Since when the figures show a problem (503s or latency over the SLO, "
            "preemptions); with replicas capped a budget move waits until it fills a window."
        ),
    )
    fewer_pods_looked_at: datetime | None = Field(
        default=None,
        description=(
            "When the engine model last looked for a budget move that meets the SLO on fewer "
            "pods (RetuneForFewerPods), or with no pod to save raises what every pod serves "
            "(RetuneForCapacity); it looks again after the tuner's recheck interval, when the "
            "operator's look budget (tuningLookCpuPerMinute) has CPU left."
        ),
    )
    window: list[WindowSample] = Field(
        default_factory=list,
        max_length=MAX_WINDOW_SAMPLES,
        description=(
            "Recent samples, kept here to survive restarts: each pass's arrival rate "
            "(request_rate, for the forecast's trend) and the engine model's capacity per pod "
            "(model_capacity, for the scale-down)."
        ),
    )


class GPUStatus(StatusModel):
    resolved_type: str | None = Field(
        default=None,
        description=(
            "Catalog GPU type the pods got: spec.gpu.type, or with spec.gpu.fallbackTypes the "
            "types of the nodes the pods are bound to (comma-separated, most preferred first)."
        ),
    )
    resource_name: str | None = Field(
        default=None, description="Device resource requested, e.g. nvidia.com/gpu."
    )
    unknown: bool | None = Field(
        default=None, description="True when spec.gpu.type is not in the operator's catalog."
    )


class VLLMServiceStatus(StatusModel):
    observed_generation: int | None = Field(
        default=None, description="metadata.generation of the spec last fully reconciled."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Progressing, Degraded, Stalled and tuning conditions.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
    )
    replicas: int | None = Field(
        default=None, description="Pods of the current Deployment (the scale subresource's count)."
    )
    ready_replicas: int | None = Field(default=None, description="Pods ready to serve.")
    updated_replicas: int | None = Field(
        default=None, description="Pods running the current rendering."
    )
    selector: str | None = Field(
        default=None, description="Label selector of the pods, for the scale subresource."
    )
    effective: EffectiveStatus | None = Field(
        default=None, description="What the pods actually run."
    )
    metrics: MetricsStatus | None = Field(
        default=None, description="Last observed service-level figures."
    )
    tuning: TuningStatus | None = Field(default=None, description="Tuner state and decisions.")
    gpu: GPUStatus | None = Field(default=None, description="GPU type resolution.")
