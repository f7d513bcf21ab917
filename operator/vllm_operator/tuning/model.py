"""Types the tuner's pure core works on: what was measured, what is remembered, what is decided.

`MetricsSnapshot` is built by the Prometheus adapter (operator) and by the simulator (benchmarks)
alike, so `decide()` cannot tell them apart. Every figure may be None: "not measured" is a fact
the rules must handle, never a zero.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Final, Literal

# Budget fields the tuner may move, by their spec names (spec.budgets.<group>.<key>).
from vllm_operator.api.budgets import BudgetKey as BudgetKey
from vllm_operator.planning.lengths import Empirical
from vllm_operator.tuning.reasons import Reason

# Why a snapshot cannot be acted on; "ok" when it can.
Quality = Literal["ok", "missing", "stale", "partial", "invalid", "error"]
ActionKind = Literal["ScaleReplicas", "SetBudget", "Rollback", "Hold"]


# Largest believable value per figure. Beyond it a figure is a broken exporter or query (a counter
# reset read as a rate, a unit mistake), not load: a day of latency, a million requests/s, ten
# million sequences. Every figure must also be finite and >= 0. The metrics adapter checks these
# same bounds and reports a breach as quality "invalid"; the constructors refuse one outright.
RATE_MAX: Final = 1e6
# the least per-pod capacity read back from status: below it (0, a subnormal: the CRD allows
# both) the pods a load needs overflow; a real pod serves more than one request in 1,000 s
CAPACITY_MIN: Final = 1e-3
PLAUSIBLE_MAX: Final[Mapping[str, float]] = {
    "request_rate": RATE_MAX,
    "rejection_rate": RATE_MAX,
    "admitted_rate": RATE_MAX,
    "preemption_rate": RATE_MAX,
    "rejection_ratio": 1.0,
    "kv_usage": 1.0,
    "ttft_p95": 86400.0,
    "itl_p95": 86400.0,
    "queue_time_p95": 86400.0,
    "e2e_p95": 86400.0,
    "waiting": 1e7,
    "running": 1e7,
    "prompt_tokens_per_request": 1e8,
    "arrival_dispersion": 1e7,  # a count of requests per 30 s, at most
    "window_seconds": 86400.0 * 7,
    "sample_age": math.inf,
}


class ImplausibleFigureError(ValueError):
    """A snapshot built with a figure no engine produces; the message names the figure."""


def check_figure(name: str, value: float) -> str | None:
    """Why `value` cannot be figure `name` (one phrase), or None when it can."""
    if not math.isfinite(value):
        return f"{name} is {value}"
    if value < 0:
        return f"{name} is negative ({value:.3g})"
    upper = PLAUSIBLE_MAX.get(name.split(" ")[0], math.inf)
    if value > upper:
        return f"{name} is {value:.3g}, above {upper:g}"
    return None


def _refuse_implausible(obj: object, prefix: str) -> None:
    for f in fields(obj):  # type: ignore[arg-type]
        value = getattr(obj, f.name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        problem = check_figure(f.name, float(value))
        if problem is not None:
            raise ImplausibleFigureError(f"{prefix}.{problem}")


@dataclass(frozen=True)
class PodFigures:
    """One replica's gauges, for the "partial" verdict and per-pod status."""

    pod: str
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None  # 0-1
    up: bool | None = None  # Prometheus' `up` for the pod's target at the last scrape
    sample_age: float | None = None  # seconds since the pod's newest engine sample

    def __post_init__(self) -> None:
        _refuse_implausible(self, "PodFigures")


@dataclass(frozen=True)
class FleetView:
    """What the Deployment says, so the tuner can hold still during rollouts."""

    desired: int
    ready: int
    updated: int
    rolling: bool  # a rollout is under way (new template not everywhere yet)
    # seconds from creation to Ready of the pods that became Ready (tuning/forecast.py learns
    # the pod ready time from them); empty when unknown
    ready_seconds: tuple[float, ...] = ()
    # pods the scheduler found no node for (PodScheduled False, reason Unschedulable): with no
    # free GPU of the type the replica lever is capped where the pods stand (guards.py)
    unschedulable: int = 0

    @property
    def in_rollout(self) -> bool:
        """The new template is not on every pod yet."""
        return self.rolling or self.updated < self.desired


@dataclass(frozen=True)
class MetricsSnapshot:
    observed_at: datetime
    window_seconds: float
    quality: Quality
    problem: str | None = None  # one sentence when quality != "ok"
    pods_expected: int = 0
    pods_scraped: int = 0
    request_rate: float | None = None  # requests/s that reached the server (admitted + refused)
    rejection_rate: float | None = None  # 503s/s from vllm:admission_rejections_total
    rejection_ratio: float | None = None  # rejection_rate / request_rate
    ttft_p95: float | None = None  # seconds
    itl_p95: float | None = None
    queue_time_p95: float | None = None
    e2e_p95: float | None = None
    waiting: float | None = None  # mean over the window, summed over pods
    running: float | None = None  # likewise
    kv_usage: float | None = None  # max over pods of the window mean, 0-1
    preemption_rate: float | None = None  # per second, all pods
    prompt_tokens_per_request: float | None = None  # mean prompt length of admitted requests
    pods: tuple[PodFigures, ...] = ()
    fleet: FleetView | None = None
    admitted_rate: float | None = None  # requests/s the engines finished (any finish reason)
    rejection_rate_by_reason: dict[str, float] = field(default_factory=dict)  # reason -> 503s/s
    sample_age: float | None = None  # seconds since the newest engine sample of any pod
    # Token lengths of the requests finished in the window, from vLLM's per-request histograms
    # summed over pods (docs/metrics.md); None when not measured (no finished request, no series).
    prompt_lengths: Empirical | None = None
    output_lengths: Empirical | None = None
    # How bursty arrivals were: variance over mean of the finished requests per 30 s, in Allan's
    # form (metrics/queries.py build_arrival_dispersion); about 1 for Poisson arrivals. None when
    # not measured (a window under 4 minutes; it also needs a scrape interval of 15 s or less,
    # docs/metrics.md).
    arrival_dispersion: float | None = None
    # The same arrival rate one traffic period back (the daily shape, tuning/forecast.py);
    # None when not asked for or not answered.
    past_period: PastPeriod | None = None

    def __post_init__(self) -> None:
        _refuse_implausible(self, "MetricsSnapshot")
        for reason, rate in self.rejection_rate_by_reason.items():
            problem = check_figure("rejection_rate", rate)
            if problem is not None:
                raise ImplausibleFigureError(f"MetricsSnapshot.{problem} (reason {reason})")
        if self.window_seconds <= 0:
            raise ImplausibleFigureError("MetricsSnapshot.window_seconds must be > 0")

    @property
    def usable(self) -> bool:
        return self.quality == "ok"

    def figures(self) -> dict[str, float]:
        """The numbers a decision record carries, without the Nones."""
        names = (
            "request_rate", "rejection_rate", "rejection_ratio", "ttft_p95", "itl_p95",
            "queue_time_p95", "e2e_p95", "waiting", "running", "kv_usage", "preemption_rate",
            "prompt_tokens_per_request",
        )  # fmt: skip
        out = {n: float(v) for n in names if (v := getattr(self, n)) is not None}
        return out


@dataclass(frozen=True)
class Hold:
    """A direction the tuner may not move a field in until `until` (after a rollback)."""

    field: BudgetKey
    direction: Literal["up", "down"]
    until: datetime


@dataclass(frozen=True)
class PendingRetune:
    """A budget change whose effect is still to be judged against the figures before it."""

    field: BudgetKey
    from_value: int | None
    to_value: int
    applied_at: datetime
    before: dict[str, float]
    # First pass after applied_at with the fleet steady (rollout done); the change is judged once
    # figures from after this time fill the snapshot window.
    settled_at: datetime | None = None


@dataclass(frozen=True)
class Canary:
    """A budget change running on the canary pod only (tuning/canary.py)."""

    field: BudgetKey
    from_value: int | None
    to_value: int
    started_at: datetime
    ready_at: datetime | None = None  # its pod first seen ready

    @property
    def direction(self) -> Literal["up", "down"]:
        return "up" if self.from_value is None or self.to_value > self.from_value else "down"


@dataclass(frozen=True)
class Capacity:
    """Requests/s one pod serves within the SLO, learned from the fleet (scaling.py).

    Set to the per-pod arrival rate at which a scale-up for a missed SLO fired, raised when a
    higher rate is served with headroom, forgotten after capacity_memory and on any budget change
    (the engine then has another capacity).
    """

    per_pod: float
    at: datetime


CapacitySource = Literal["observed", "model"]


@dataclass(frozen=True)
class CapacityEstimate:
    """A per-pod capacity and where it came from (tuning/capacity.py chooses among them)."""

    per_pod: float  # requests/s one pod serves within the SLO
    source: CapacitySource
    at: datetime | None = None  # when it was learned or computed
    basis: str | None = None  # what it was computed for (the model's workload bucket)


@dataclass(frozen=True)
class ReadyTime:
    """Seconds a pod of this service takes from creation to Ready, learned from its own pods."""

    seconds: float
    at: datetime


@dataclass(frozen=True)
class RateSample:
    """The arrival rate one pass saw (the snapshot's window mean), for the trend forecast, and
    the engine model's per-pod capacity that pass (None: it gave none), for the scale-down."""

    at: datetime
    rate: float
    capacity: float | None = None


@dataclass(frozen=True)
class PastPeriod:
    """The snapshot's arrival rate as it was one traffic period ago, around now - period.

    Prometheus keeps what the pods served yesterday (or one declared period ago): the rate query
    of the snapshot, evaluated at steps around that time, is the shape the load took then.
    """

    period: float  # seconds, > 0
    rates: tuple[RateSample, ...]  # oldest first, at the (past) times they describe

    def __post_init__(self) -> None:
        if not (math.isfinite(self.period) and self.period > 0):
            raise ImplausibleFigureError(f"PastPeriod.period must be > 0 s, got {self.period}")
        for s in self.rates:
            problem = check_figure("request_rate", s.rate)
            if problem is not None:
                raise ImplausibleFigureError(f"PastPeriod.{problem} (at {s.at.isoformat()})")
        if any(b.at <= a.at for a, b in itertools.pairwise(self.rates)):
            raise ImplausibleFigureError("PastPeriod.rates must be in increasing time order")


@dataclass(frozen=True)
class Forecast:
    """Arrivals expected one pod ready time ahead (tuning/forecast.py); shown in status."""

    rate: float  # requests/s expected at now + horizon
    now_rate: float  # the snapshot's rate
    slope: float  # requests/s per second, the trend fitted over the short window (>= 0 used)
    horizon: float  # seconds ahead: the pod ready time
    ready_time_source: Literal["learned", "default"]
    samples: int  # passes the trend was fitted on
    # the peak over the horizon one period ago, moved to today's level, when the recent passes
    # followed that period's shape (forecast.py); None: the trend alone
    past_period_rate: float | None = None


@dataclass(frozen=True)
class TuningState:
    """Everything the tuner remembers between passes; persisted in status.tuning."""

    desired_replicas: int | None = None
    overrides: dict[str, int] = field(default_factory=dict)  # BudgetKey -> value in force
    last_scale_at: datetime | None = None
    last_scale_from: int | None = None  # replicas before that change: was it a scale-up?
    scale_down_votes: int = 0
    retune_cooldown_until: datetime | None = None
    restart_times: tuple[datetime, ...] = ()
    pending: PendingRetune | None = None
    holds: tuple[Hold, ...] = ()
    capacity: Capacity | None = None
    canary: Canary | None = None
    ready_time: ReadyTime | None = None
    arrivals: tuple[RateSample, ...] = ()  # oldest first, within the forecast windows
    # the first pass of the problem the figures show now (None: the last pass that read them
    # showed none); a budget move at the replica cap waits for it to fill a window
    problem_since: datetime | None = None
    # when the engine model last looked for budgets that meet the SLO on fewer pods (rule 9b):
    # an opportunity, looked at once per fewer_pods_recheck, not on every pass
    fewer_pods_looked_at: datetime | None = None


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    field: str | None = None  # "replicas" or a BudgetKey
    from_value: int | None = None
    to_value: int | None = None


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: Reason  # reasons.py lists them all, e.g. ScaleUpRejections, HoldMetricsStale
    message: str  # one human sentence with the figures that drove it
    figures: dict[str, float]
    state: TuningState  # what to persist after this pass (also when holding)
    applied: bool = True  # False in Recommend mode: recorded, not done
    # budget keys the tuner wanted to move past an edge of their range (a Hold's blockers)
    pinned: tuple[str, ...] = ()
    forecast: Forecast | None = None  # the arrivals forecast of the pass, when one was made
    model_capacity: CapacityEstimate | None = None  # the model's estimate given to the pass
    capacity_source: CapacitySource | None = None  # which capacity the rules trusted
    # the engine model's move would pay if a GPU of the type is free (Inputs.asks_spare_gpu)
    asks_spare_gpu: bool = False
    # the service is due for rule 9b's look, which the pass could not make (Inputs.may_look)
    asks_look: bool = False
