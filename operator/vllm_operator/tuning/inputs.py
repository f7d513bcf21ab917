"""One tuning pass's inputs, and the values derived from them that every rule needs.

Budget values are read the way the renderer writes them: an override in force (autotune Auto
only) replaces the spec value; an unset field is vLLM's own default, which the tuner cannot know
(it depends on the GPU), except maxActiveSeqs, which defaults to maxSeqs (docs/vllm-0.33.md §1.2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from vllm_operator.api.budgets import BUDGET_FIELDS
from vllm_operator.api.spec import AutoscalingSpec, Bound, VLLMServiceSpec
from vllm_operator.tuning.model import BudgetKey, CapacityEstimate, MetricsSnapshot, TuningState
from vllm_operator.tuning.observed_workload import reporting_pods
from vllm_operator.tuning.outcome import Blocked
from vllm_operator.tuning.settings import TuningSettings

_ATTRS: dict[str, tuple[str, str]] = {f.key: (f.group, f.attr) for f in BUDGET_FIELDS}


@dataclass(frozen=True)
class Targets:
    """The SLO in seconds and ratios; None = no target, so rules triggered by it are off."""

    ttft: float | None
    itl: float | None
    max_rejection_ratio: float


def targets_of(spec: VLLMServiceSpec, settings: TuningSettings) -> Targets:
    slo = spec.slo
    if slo is None:
        return Targets(None, None, settings.default_max_rejection_ratio)
    ratio = slo.max_rejection_ratio
    return Targets(
        ttft=slo.ttft_p95_seconds,
        itl=slo.itl_p95_seconds,
        max_rejection_ratio=settings.default_max_rejection_ratio if ratio is None else ratio,
    )


def spec_budget(spec: VLLMServiceSpec, key: str) -> int | None:
    """The value spec.budgets holds for `key`, None when unset."""
    group_name, attr = _ATTRS[key]
    group = None if spec.budgets is None else getattr(spec.budgets, group_name)
    value = None if group is None else getattr(group, attr)
    return None if value is None else int(value)


def budget_in_force(spec: VLLMServiceSpec, overrides: Mapping[str, int], key: str) -> int | None:
    """Override, spec, or (maxActiveSeqs only) the maxSeqs it defaults to; None when unset."""
    override = overrides.get(key)
    if override is not None:
        return override
    value = spec_budget(spec, key)
    if value is None and key == "maxActiveSeqs":
        return budget_in_force(spec, overrides, "maxSeqs")
    return value


def spec_bound(spec: VLLMServiceSpec, key: str) -> Bound | None:
    bounds = None if spec.autotune is None else spec.autotune.bounds
    return None if bounds is None else getattr(bounds, _ATTRS[key][1])


def canary_on(spec: VLLMServiceSpec) -> bool:
    """Budget changes run on one canary pod first (tuning/canary.py divert_to_canary)."""
    autotune = spec.autotune
    return autotune is not None and autotune.mode == "Auto" and autotune.canary


def autotune_mode(spec: VLLMServiceSpec) -> str:
    return "Off" if spec.autotune is None else spec.autotune.mode


def autoscaling_of(spec: VLLMServiceSpec) -> AutoscalingSpec | None:
    """spec.autoscaling when enabled, else None: replicas are then the user's."""
    scaling = spec.autoscaling
    return scaling if scaling is not None and scaling.enabled else None


@dataclass(frozen=True)
class Inputs:
    spec: VLLMServiceSpec
    snapshot: MetricsSnapshot
    state: TuningState  # normalised (see state.py), votes already counted for this pass
    now: datetime
    settings: TuningSettings
    # True in mode Auto, and in the advice run of Recommend (decide.py): budget moves are possible.
    autotune_acts: bool
    # capacity estimates from sources other than this fleet's observations (capacity.py)
    capacities: tuple[CapacityEstimate, ...] = ()
    # set when the engine model judged this pass's budget moves not worth their restarts
    # (retune_move.py): every budget remedy of the rules is then blocked by it
    budget_blocker: Blocked | None = None
    # how many surge pods the free GPUs of the type place (render/rollout.py): with one, a
    # rollout loses no pod's capacity, and with as many as the fleet has it replaces them all in
    # one ready time; None: not looked at (the tune handler looks only when it matters)
    spare_pods: int | None = None
    # set when the model's best move did not pay for want of that look: with a free GPU its
    # restarts cost nothing, and the pass is worth deciding again (decide_seeing_spare_gpu)
    asks_spare_gpu: bool = False
    # whether this pass may make rule 9b's look (the operator's look budget has CPU for it,
    # tuning/look_budget.py); a pass that may not, and is due for one, asks (asks_look)
    may_look: bool = True
    asks_look: bool = False

    @cached_property
    def targets(self) -> Targets:
        return targets_of(self.spec, self.settings)

    @property
    def spare_gpu(self) -> bool | None:
        """A GPU of the type is free for a surge pod (None: not looked at)."""
        return None if self.spare_pods is None else self.spare_pods > 0

    @property
    def surge_waves(self) -> int:
        """Ready times a rollout of the fleet takes: the free GPUs' surge pods replace that many
        pods per ready time (render/rollout.py); one pod at a time with none known free."""
        width = max(1, min(self.spare_pods or 1, self.replicas))
        return math.ceil(self.replicas / width)

    @cached_property
    def scaling(self) -> AutoscalingSpec | None:
        return autoscaling_of(self.spec)

    @cached_property
    def replicas(self) -> int:
        """Replicas in force: the tuner's own count once it has one, else spec.replicas."""
        desired = self.state.desired_replicas
        return self.spec.replicas if desired is None else desired

    @cached_property
    def pods(self) -> int:
        """The denominator of per-pod figures: pods that reported, else the replica count."""
        return reporting_pods(self.snapshot, self.replicas)

    @cached_property
    def unplaced(self) -> int:
        """Pods of a finished rollout that no node can take (no free GPU of the type): the
        replica lever is capped where the ready pods stand. 0 while a rollout runs."""
        fleet = self.snapshot.fleet
        if fleet is None or fleet.in_rollout:
            return 0
        return max(0, min(fleet.unschedulable, fleet.desired - fleet.ready))

    def unplaced_phrase(self) -> str:
        return (
            f"{self.unplaced} of {self.replicas} pods unschedulable: "
            f"no node has a free {self.spec.gpu.type} GPU"
        )

    def per_pod(self, total: float | None) -> float | None:
        return None if total is None else total / self.pods

    def budget(self, key: BudgetKey) -> int | None:
        """Value in force: override, spec, or (maxActiveSeqs only) the maxSeqs it defaults to."""
        return budget_in_force(self.spec, self.state.overrides, key)

    @cached_property
    def active_cap(self) -> int | None:
        """How many requests one pod may run: min(maxSeqs, maxActiveSeqs) where known."""
        known = [v for v in (self.budget("maxSeqs"), self.budget("maxActiveSeqs")) if v]
        return min(known) if known else None

    @cached_property
    def rates_trusted(self) -> bool:
        """Enough traffic that ratios and percentiles are figures, not noise."""
        rate = self.snapshot.request_rate
        return rate is not None and rate >= self.settings.min_request_rate
