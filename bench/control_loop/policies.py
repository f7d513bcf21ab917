"""The control policies compared; each one is a fresh object per run (they keep state).

1-2  Static: fixed replicas on vLLM's default flags (no budgets in the spec).
3    HPA on KEDA: replicas = ceil(sum(vllm:num_requests_waiting) / target), as KEDA's Prometheus
     scaler with an AverageValue target, evaluated every 15 s (HPA's sync period) on the latest
     scraped values; 10% tolerance, scale-up at most x2 or +4 pods, and the default 300 s
     scale-down stabilisation (the highest recommendation of the last 300 s wins).
4    Knative KPA: concurrency = running requests, sampled from the ready pods every 2 s
     (Knative scrapes its queue-proxies, not Prometheus); desired = ceil(mean / target) over the
     60 s stable window, or over the 6 s panic window in panic mode (entered when the panic
     desire is at least twice the ready pods, left after 60 s without that; no scale-down in
     panic); scale-down by at most half the ready pods per decision.
5    llm-d WVA, its saturation analyzer's defaults as its docs describe them, every 30 s on
     max_over_time(...[1m]) of each ready pod's KV usage and waiting requests: a replica is
     saturated at KV usage >= 0.80 or >= 5 waiting; the spare of a replica that is not is
     0.80 - KV and 5 - waiting; scale up one replica when the average spare KV falls under 0.10
     or the average spare queue under 3 (or every replica is saturated), never while a replica
     is pending; scale down one only if the load of the fleet spread over one replica fewer
     keeps both spares at or above those triggers.
6-7  Ours: the operator's decide() every 30 s on a snapshot built from the scraped samples
     (vllm_twin/observe.py), with the state it returns, and the operator's plan of the pass
     (tuning/plan.py) carried out on the fleet; autotune Off (replicas only) or Auto. Each pass
     computes the engine model's capacity estimate the way the operator's handler does
     (tuning/model_capacity.py, through one process-wide cache) and passes it to decide().
-    OracleSchedule: a bound, not a policy. The oracle's counts (oracle.py), each asked for the
     longest model load before its block begins, so that its pods are ready when the block
     does: what knowing the whole hour costs on a cluster where a pod holds its GPU while it
     loads and while it drains.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass, field, replace
from datetime import timedelta

from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.sim.catalog import load_catalog
from vllm_operator.sim.engine import EngineConfig
from vllm_operator.tuning.decide import decide_seeing_spare_gpu
from vllm_operator.tuning.model import CapacityEstimate, TuningState
from vllm_operator.tuning.model_capacity import CapacityCache, capacity_estimates, model_capacity
from vllm_operator.tuning.plan import TunePlan, build_tune_plan
from vllm_operator.tuning.settings import TuningSettings
from vllm_twin.observe import SCRAPE_INTERVAL, observe_snapshot

from .harness import EPOCH, READY_DELAY, Context, engine_config
from .scenarios import MAX_REPLICAS, MIN_REPLICAS, Scenario

# One cache for every run of the process, as the operator holds one for every service.
CAPACITY_CACHE = CapacityCache()
CATALOG = load_catalog()


def _clamp(n: int) -> int:
    return max(MIN_REPLICAS, min(MAX_REPLICAS, n))


@dataclass
class Static:
    name: str
    replicas: int
    tick: float = SCRAPE_INTERVAL

    def start(self, scenario: Scenario) -> tuple[int, EngineConfig]:
        spec = scenario.profile.spec(self.replicas, "Off", budgets=False)
        return self.replicas, engine_config(spec)

    def on_tick(self, now: float, ctx: Context) -> None:
        return None

    def notes(self) -> dict[str, int]:
        return {}

    def log(self) -> list[str]:
        return []


@dataclass
class OracleSchedule:
    counts: tuple[int, ...]  # the oracle's replicas per block
    block: float  # seconds
    name: str = "oracle-schedule"
    tick: float = SCRAPE_INTERVAL
    lead: float = READY_DELAY[1]  # the longest model load: a pod asked this early is in time

    def start(self, scenario: Scenario) -> tuple[int, EngineConfig]:
        # the oracle's fleets run the spec's flags (oracle.py)
        first = self.counts[0]
        return first, engine_config(scenario.profile.spec(first, "Off"))

    def wanted(self, now: float) -> int:
        """The most pods any block needs that began, or begins within `lead`, and has not ended."""
        return max(
            (n for k, n in enumerate(self.counts)
             if k * self.block - self.lead <= now < (k + 1) * self.block),
            default=self.counts[-1],
        )  # fmt: skip

    def on_tick(self, now: float, ctx: Context) -> None:
        ctx.controls.scale_to(self.wanted(now), now)

    def notes(self) -> dict[str, int]:
        return {}

    def log(self) -> list[str]:
        return []


@dataclass
class Hpa:
    initial: int
    target: float = 5.0  # waiting requests per replica
    name: str = "hpa-waiting"
    tick: float = 15.0
    stabilization: float = 300.0
    tolerance: float = 0.1
    _recommendations: deque[tuple[float, int]] = field(default_factory=deque)

    def start(self, scenario: Scenario) -> tuple[int, EngineConfig]:
        # as if it had been recommending the initial count: no scale-down in the first 300 s
        self._recommendations.append((0.0, self.initial))
        return self.initial, engine_config(scenario.profile.spec(self.initial, "Off"))

    def on_tick(self, now: float, ctx: Context) -> None:
        store = ctx.store
        up = [p for p, ok in store.targets.items() if ok and p in store.series]
        if not up:
            return  # no metric: the HPA keeps the current count
        waiting = sum(store.series[p][-1].waiting for p in up)  # an instant sum()
        current = ctx.controls.replicas
        ratio = waiting / (self.target * current)
        desired = current if abs(ratio - 1) <= self.tolerance else math.ceil(waiting / self.target)
        desired = _clamp(desired)
        recs = self._recommendations
        recs.append((now, desired))
        while recs and recs[0][0] <= now - self.stabilization:
            recs.popleft()
        recommendation = max(current, desired)  # scale-up stabilisation is 0 s
        recommendation = min(recommendation, max(d for _, d in recs))
        recommendation = min(recommendation, max(2 * current, current + 4))
        ctx.controls.scale_to(recommendation, now)

    def notes(self) -> dict[str, int]:
        return {}

    def log(self) -> list[str]:
        return []


@dataclass
class Kpa:
    initial: int
    target: float  # running requests per pod
    name: str = "kpa-running"
    tick: float = 2.0
    stable: float = 60.0
    panic: float = 6.0
    panic_threshold: float = 2.0
    _samples: deque[tuple[float, int]] = field(default_factory=deque)
    _panic_since: float | None = None
    _panic_max: int = 0

    def start(self, scenario: Scenario) -> tuple[int, EngineConfig]:
        return self.initial, engine_config(scenario.profile.spec(self.initial, "Off"))

    def _mean(self, now: float, window: float) -> float:
        values = [v for t, v in self._samples if t > now - window]
        return sum(values) / len(values)

    def on_tick(self, now: float, ctx: Context) -> None:
        ready = [r for r in ctx.fleet.live if r.state == "ready"]
        self._samples.append((now, sum(r.engine.stats().num_running for r in ready)))
        while self._samples[0][0] <= now - self.stable:
            self._samples.popleft()
        if not ready or now < self.stable:
            return  # the windows are not full yet: a near-empty mean would scale to the minimum
        pods = len(ready)
        low, high = math.floor(pods / 2), 1000 * pods  # max scale-down rate 2, up rate 1000
        stable = min(high, max(low, math.ceil(self._mean(now, self.stable) / self.target)))
        panic = min(high, max(low, math.ceil(self._mean(now, self.panic) / self.target)))
        if panic / pods >= self.panic_threshold:
            self._panic_since = now
        elif self._panic_since is not None and now - self._panic_since >= self.stable:
            self._panic_since, self._panic_max = None, 0
        if self._panic_since is not None:
            desired = self._panic_max = max(panic, self._panic_max)
        else:
            desired = stable
        ctx.controls.scale_to(_clamp(desired), now)

    def notes(self) -> dict[str, int]:
        return {}

    def log(self) -> list[str]:
        return []


@dataclass
class Wva:
    initial: int
    name: str = "wva-saturation"
    tick: float = 30.0
    lookback: float = 60.0  # max_over_time[1m]
    kv_saturated: float = 0.80
    queue_saturated: float = 5.0
    kv_spare_trigger: float = 0.10
    queue_spare_trigger: float = 3.0

    def start(self, scenario: Scenario) -> tuple[int, EngineConfig]:
        return self.initial, engine_config(scenario.profile.spec(self.initial, "Off"))

    def _pods(self, now: float, ctx: Context) -> list[tuple[float, float]]:
        """(KV usage, waiting) per ready pod, each the max over the last minute's scrapes."""
        store, out = ctx.store, []
        for pod, up in store.targets.items():
            recent = [s for s in store.series.get(pod, []) if s.time > now - self.lookback]
            if up and recent:
                out.append((max(s.kv_usage for s in recent), max(s.waiting for s in recent)))
        return out

    def on_tick(self, now: float, ctx: Context) -> None:
        pods = self._pods(now, ctx)
        if not pods:
            return  # no metric: nothing to analyse
        current = ctx.controls.replicas
        free = [(kv, q) for kv, q in pods if kv < self.kv_saturated and q < self.queue_saturated]
        if free:
            spare_kv = sum(self.kv_saturated - kv for kv, _ in free) / len(free)
            spare_q = sum(self.queue_saturated - q for _, q in free) / len(free)
        else:
            spare_kv = spare_q = 0.0
        pending = current > len(ctx.fleet.ready)
        if spare_kv < self.kv_spare_trigger or spare_q < self.queue_spare_trigger:
            if not pending:
                ctx.controls.scale_to(_clamp(current + 1), now)
            return
        if current <= MIN_REPLICAS or len(free) < len(pods):
            return
        # the simulated removal: the same load on one replica fewer
        fewer = current - 1
        kv_after = self.kv_saturated - sum(kv for kv, _ in pods) / fewer
        q_after = self.queue_saturated - sum(q for _, q in pods) / fewer
        if kv_after >= self.kv_spare_trigger and q_after >= self.queue_spare_trigger:
            ctx.controls.scale_to(_clamp(fewer), now)

    def notes(self) -> dict[str, int]:
        return {}

    def log(self) -> list[str]:
        return []


@dataclass
class Ours:
    name: str
    autotune: str  # "Off": replicas only; "Auto": replicas and budgets
    initial: int
    tick: float = SCRAPE_INTERVAL
    period: float = 30.0  # the tuner's interval
    window: float = 300.0  # the operator's default metricsWindow
    settings: TuningSettings = field(default_factory=TuningSettings)
    model: bool = True  # give decide() the engine model's capacity (False: observed only)
    state: TuningState = field(default_factory=TuningState)
    reasons: Counter[str] = field(default_factory=Counter)
    actions: list[str] = field(default_factory=list)

    def start(self, scenario: Scenario) -> tuple[int, EngineConfig]:
        self.spec = scenario.profile.spec(self.initial, self.autotune, period=scenario.period)
        meta = {"name": scenario.name.replace("/", "-"), "namespace": "bench", "generation": 1}
        self.service = VLLMService(metadata=meta, spec=self.spec)
        # as if it had just scaled to the initial count, like the HPA's seeded history
        self.state = TuningState(desired_replicas=self.initial, last_scale_at=EPOCH)
        return self.initial, engine_config(self.spec)

    def on_tick(self, now: float, ctx: Context) -> None:
        # Like the KPA, it waits for its window to fill: an operator that had been running
        # there would find Prometheus' history, and a half-empty window reads every rate low.
        if now % self.period or now < self.window:
            return
        stale_after = self.settings.staleness_limit.total_seconds()
        scaling = self.spec.autoscaling
        snapshot = observe_snapshot(
            ctx.store, ctx.fleet, now, window=self.window, epoch=EPOCH, stale_after=stale_after,
            period=None if scaling is None else scaling.forecast_period_seconds,
        )  # fmt: skip
        if snapshot.fleet is not None:  # what the operator reads from the pods' conditions
            pending = ctx.controls.unscheduled  # asked for, on the current template, Pending
            fleet = replace(
                snapshot.fleet,
                desired=snapshot.fleet.desired + pending,
                updated=snapshot.fleet.updated + pending,
                unschedulable=pending,
                ready_seconds=ctx.controls.ready_seconds(),
            )
            snapshot = replace(snapshot, fleet=fleet)
        at = EPOCH + timedelta(seconds=now)
        capacities: tuple[CapacityEstimate, ...] = ()
        if self.model:
            found = model_capacity(
                self.spec, snapshot, self.state, self.settings,
                catalog=CATALOG, cache=CAPACITY_CACHE,
            )  # fmt: skip
            capacities = capacity_estimates(found)
        decision = decide_seeing_spare_gpu(
            self.spec, snapshot, self.state, at, self.settings, capacities,
            ctx.controls.spare_pods,
        )  # fmt: skip
        self.state = decision.state  # persisted exactly as returned, like status.tuning
        self.reasons[decision.reason.value] += 1
        plan = build_tune_plan(
            self.service,
            decision,
            snapshot,
            at,
            self.settings,
            window=f"{self.window:.0f}s",
            conditions=[],
        )
        self._execute(plan, now, ctx)

    def _execute(self, plan: TunePlan, now: float, ctx: Context) -> None:
        """The operator's writes (handlers/tune.py), done to the fleet: the Deployment's
        replicas, and the re-render that restarts every pod with the new overrides."""
        if plan.replicas is None and not plan.rerender:
            return  # status and events only: nothing the fleet sees
        self.actions += [f"{now:.0f}s {e.reason}: {e.message}" for e in plan.events]
        if plan.replicas is not None:
            ctx.controls.scale_to(plan.replicas, now)
        if plan.rerender:
            ctx.controls.restart(engine_config(self.spec, plan.overrides), now)

    def notes(self) -> dict[str, int]:
        return dict(self.reasons.most_common())

    def log(self) -> list[str]:
        return list(self.actions)
