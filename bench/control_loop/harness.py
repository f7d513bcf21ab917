"""One policy on one scenario: the twin fleet in virtual time with a real cluster's delays.

Modelled delays: a new replica takes traffic 240 s +- 30 s (uniform, seeded) after it is asked
for (model load); a flag change replaces every pod the same way, with the strategy the operator
gives the rollout (render/rollout.py): where GPUs of the type are free, surge pods (as many at
once as the free GPUs place, up to the replicas) load before old pods stop (maxUnavailable 0),
else one pod at a time goes first (maxSurge 0, maxUnavailable 1); Prometheus scrapes every pod
every 15 s; controllers act on their own period (policies.py). A node loss (scenarios.py)
takes half the pods away at once and the Deployment asks for their replacements, which load
like any new pod. GPU time runs from the moment a pod is asked for (its GPU is held while the
model loads) until it has drained, clipped to the arrivals' span.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from vllm_operator.api.budgets import BUDGET_FIELDS
from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.api.status import BudgetValues
from vllm_operator.render.args import apply_overrides, build_args
from vllm_operator.render.rollout import compute_rollout_strategy
from vllm_operator.sim.catalog import load_catalog
from vllm_operator.sim.engine import EngineConfig
from vllm_operator.sim.fleet import Fleet
from vllm_operator.sim.runner import RunResult, run
from vllm_twin.argv import parse_vllm_argv
from vllm_twin.observe import SCRAPE_INTERVAL, ObservedFleet, ScrapeStore, scrape_fleet

from .measure import is_503, window_share, window_stats
from .scenarios import MAX_REPLICAS, Scenario

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
READY_DELAY = (210.0, 270.0)  # 240 s +- 30 s
BALANCER = "round_robin"  # a Kubernetes Service in front of the pods


def engine_config(
    spec: VLLMServiceSpec, overrides: Mapping[str, int] | None = None
) -> EngineConfig:
    """The flags the pods run: the operator's renderer, parsed by the twin's `vllm serve` parser."""
    values = {f.attr: (overrides or {}).get(f.key) for f in BUDGET_FIELDS}
    rendered = apply_overrides(spec, BudgetValues(**values))
    return parse_vllm_argv(build_args(rendered), {}).engine


class Controls:
    """What a policy may do to the fleet, with the delays, and the books of what it did."""

    def __init__(
        self,
        fleet: Fleet,
        rng: random.Random,
        max_replicas: int = MAX_REPLICAS,
        gpus: int = MAX_REPLICAS,
    ) -> None:
        self.fleet = fleet
        self.rng = rng
        self.max_replicas = max_replicas  # the spec's maxReplicas: no policy asks for more
        # the cluster's GPUs of the type: a surge pod needs a free one, and a pod asked for
        # beyond them waits Pending, Unschedulable (no GPU-hours, never ready)
        self.gpus = gpus
        self.unscheduled = 0
        self.scaling_actions = 0
        self.restarts = 0
        self.created: dict[int, float] = {r.id: 0.0 for r in fleet.live}  # pre-warmed at t=0
        self.short_minutes: set[int] = set()  # minutes a rollout left short (Outcome)
        self._restart_delay = 0.0

    @property
    def placed(self) -> int:
        """Pods on a GPU: starting and ready."""
        return len(self.fleet.active)

    @property
    def replicas(self) -> int:
        """Replicas asked for (the Deployment's spec.replicas): placed and Pending."""
        return self.placed + self.unscheduled

    def scale_to(self, target: int, now: float) -> None:
        target = min(target, self.max_replicas)
        if target == self.replicas:
            return
        self.scaling_actions += 1
        placed = min(target, self.gpus)  # a scale-down takes the Pending pods first (ReplicaSet)
        while self.placed < placed:  # one at a time: each pod loads at its own pace
            known = {r.id for r in self.fleet.live}
            self.fleet.set_replicas(self.placed + 1, now, self.rng.uniform(*READY_DELAY))
            self.created.update({r.id: now for r in self.fleet.live if r.id not in known})
        if self.placed > placed:
            self.fleet.set_replicas(placed, now)
        self.unscheduled = target - placed

    def lose_nodes(self, now: float) -> None:
        """Half the pods' nodes are gone: those pods stop (the newest first, as the fleet picks
        them; what they hold still finishes, a simplification) and the Deployment, not the
        policy, creates their replacements, each loading for its own delay."""
        asked = self.placed
        lost = asked // 2
        if lost < 1:
            return
        self.fleet.set_replicas(asked - lost, now)
        while self.placed < asked:
            known = {r.id for r in self.fleet.live}
            self.fleet.set_replicas(self.placed + 1, now, self.rng.uniform(*READY_DELAY))
            self.created.update({r.id: now for r in self.fleet.live if r.id not in known})

    def ready_seconds(self) -> tuple[float, ...]:
        """Creation to ready of the pods ready now (the operator reads it from pod conditions);
        the pods ready from the start have none."""
        return tuple(
            sorted(
                r.ready_at - self.created[r.id]
                for r in self.fleet.ready
                if r.id in self.created and r.ready_at > self.created[r.id]
            )
        )

    def spare_pods(self) -> int:
        """The surge pods the free GPUs place (what the operator reads from the nodes and pods,
        handlers/rollout.py): GPUs held by no placed pod and no loading surge pod."""
        surging = sum(1 for r in self.fleet.live if r.surge)
        return max(0, self.gpus - self.placed - surging)

    def restart(self, cfg: EngineConfig, now: float) -> None:
        """The re-render's rollout, with the strategy the operator would give it. Surge pods
        hold the free GPUs while they load; a scale-up asked for meanwhile is placed as if they
        were free (a simplification: there it would wait Pending; ours holds a rolling fleet,
        rule 0d, and no other policy rolls). The Deployment counts the Pending pods
        as unavailable first, so of the placed pods it stops maxUnavailable minus those."""
        spare = self.spare_pods()
        if not spare and self.placed <= 1:
            raise ValueError(
                "a single placed pod with no free GPU: its rollout stalls (not modelled)"
            )
        roll = compute_rollout_strategy(self.replicas, spare, self.unscheduled)
        rolling = roll.strategy["rollingUpdate"]
        self._restart_delay = self.rng.uniform(*READY_DELAY)
        self.fleet.restart_all(
            cfg,
            now,
            self._restart_delay,
            max_unavailable=(rolling["maxUnavailable"] - self.unscheduled) or None,
            max_surge=rolling["maxSurge"],
        )
        self.note_replacements()

    def note_replacements(self) -> None:
        """Pods a restart wave created since the last look: they load for the restart's delay."""
        for r in (*self.fleet.live, *self.fleet.retired):
            if r.id not in self.created:
                self.created[r.id] = r.ready_at - self._restart_delay
                self.restarts += 1

    def gpu_seconds(self, end: float) -> float:
        self.note_replacements()
        total = 0.0
        for r in (*self.fleet.live, *self.fleet.retired):
            stop = end if r.stopped_at is None else min(r.stopped_at, end)
            total += max(0.0, stop - self.created[r.id])
        return total


@dataclass
class Context:
    """Everything a policy sees at a tick."""

    scenario: Scenario
    fleet: ObservedFleet
    store: ScrapeStore
    controls: Controls


class Policy(Protocol):
    name: str
    tick: float  # the runner's tick: how often on_tick runs

    def start(self, scenario: Scenario) -> tuple[int, EngineConfig]:
        """Initial replicas and the flags they run."""
        ...

    def on_tick(self, now: float, ctx: Context) -> None: ...

    def notes(self) -> dict[str, int]:
        """Counts worth reporting (decision reasons), empty when none."""
        ...

    def log(self) -> list[str]:
        """The actions taken, one line each, for reading what a controller did."""
        ...


@dataclass
class Outcome:
    scenario: str
    policy: str
    seed: int
    offered: int
    slo_share: float  # requests with TTFT and their own ITL p95 within the SLO, of offered
    window_share: float  # 1-minute windows whose p95s met the SLO
    windows: int
    rejected: int  # 503s (admission, or no ready replica)
    rejected_share: float
    gpu_hours: float
    scaling_actions: int
    restarts: int
    # 1-minute windows in which a rollout had stopped a pod, not replaced yet, and fewer pods
    # were ready than the load needed (the oracle's count for the block; every pod without one)
    rollout_short_windows: int
    ttft_p95: float
    itl_p95: float
    timeline: list[tuple[float, int, int]]  # (time, replicas asked for, ready)
    minute_ttft_p95: list[float | None]
    notes: dict[str, int] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    wall_seconds: float = 0.0


def run_policy(
    scenario: Scenario, policy: Policy, needed: Callable[[float], int] | None = None
) -> Outcome:
    """`policy` on `scenario`. `needed(t)`: the pods the load needs at t (the oracle's count),
    which a rollout's missing pod is counted against."""
    started = time.perf_counter()
    catalog = load_catalog()
    replicas, cfg = policy.start(scenario)
    gpu, model = catalog.gpu(scenario.profile.gpu), catalog.model(scenario.profile.model)
    fleet = ObservedFleet(cfg, gpu, model, replicas, balancer=BALANCER)
    # the same delays, in the same order, for every policy of a scenario
    rng = random.Random(f"delays:{scenario.name}:{scenario.seed}")
    controls = Controls(fleet, rng, scenario.profile.max_replicas, scenario.profile.gpus)
    ctx = Context(scenario, fleet, ScrapeStore(retention=math.inf), controls)  # a period back

    def on_tick(now: float, _fleet: Fleet) -> None:
        if now % SCRAPE_INTERVAL == 0:
            scrape_fleet(ctx.store, fleet, now)
        controls.note_replacements()
        if fleet.rollout_short and (needed is None or len(fleet.ready) < needed(now)):
            controls.short_minutes.add(int(now // 60))
        if scenario.node_loss_at is not None and now == scenario.node_loss_at:
            controls.lose_nodes(now)
        policy.on_tick(now, ctx)

    result = run(
        scenario.requests(),
        fleet,
        scenario.duration,
        on_tick,
        policy.tick,
        slo=scenario.profile.slo,
    )
    return _outcome(scenario, policy, result, controls, time.perf_counter() - started)


def _outcome(
    scenario: Scenario, policy: Policy, result: RunResult, controls: Controls, wall: float
) -> Outcome:
    f = result.figures
    windows = window_stats(result.records, scenario.profile.slo, 0.0, scenario.duration)
    rejected = sum(1 for r in result.records if is_503(r))
    step = max(1, round(30.0 / policy.tick))  # one point per 30 s is plenty for a plot
    return Outcome(
        scenario=scenario.name,
        policy=policy.name,
        seed=scenario.seed,
        offered=f.offered,
        slo_share=f.goodput_share or 0.0,
        window_share=window_share(windows),
        windows=sum(1 for w in windows if w.requests),
        rejected=rejected,
        rejected_share=rejected / f.offered if f.offered else 0.0,
        gpu_hours=controls.gpu_seconds(scenario.duration) / 3600,
        scaling_actions=controls.scaling_actions,
        restarts=controls.restarts,
        rollout_short_windows=len(controls.short_minutes),
        ttft_p95=f.ttft.p95,
        itl_p95=f.itl.p95,
        timeline=[
            (s.time, s.ready + s.starting, s.ready) for s in result.samples[step - 1 :: step]
        ],
        minute_ttft_p95=[w.ttft_p95 for w in windows],
        notes=policy.notes(),
        log=policy.log(),
        wall_seconds=wall,
    )
