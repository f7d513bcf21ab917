"""Runs every policy on every scenario: the oracle first (it sizes the static fleets and the KPA
target), then the policies and the oracle's schedule (a bound), in worker processes; results
do not depend on the job count.

Sizing from the oracle (hindsight, documented in docs/benchmarks.md):
- static-mean: the oracle's mean count, rounded to the nearest (a fleet bought for the average);
- static-peak: the oracle's largest count;
- every autoscaler starts at the oracle's count for the first block, so none pays a cold start;
- KPA target: 70% (Knative's default target utilisation) of the busiest minute's running
  requests per replica that the oracle saw meet the SLO: the load test a Knative user would run,
  done in hindsight. The HPA target (5 waiting requests per replica) is a round value.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from datetime import timedelta

from vllm_operator.tuning.settings import TuningSettings

from .harness import Outcome, Policy, run_policy
from .oracle import OracleResult, search
from .policies import Hpa, Kpa, OracleSchedule, Ours, Static, Wva
from .scenarios import Scenario
from .settings_arg import Overrides, with_overrides

POLICIES = (
    "static-mean",
    "static-peak",
    "hpa-waiting",
    "kpa-running",
    "wva-saturation",
    "ours-replicas",
    "ours-full",
)
# run by default beside the policies, reported as a bound: the oracle's schedule on the cluster
BOUNDS = ("oracle-schedule",)
ABLATIONS = ("ours-reactive", "ours-observed")  # run only when named
KNATIVE_UTILISATION = 0.7
# rule 8 never fires (a forecast is at most the present) and a scale-down fits only the present
REACTIVE = TuningSettings(forecast_max_growth=1.0, under_window=timedelta(0))


def make_policy(name: str, oracle: OracleResult, overrides: Overrides | None = None) -> Policy:
    """The policy `name` sized from the oracle; `overrides` (--settings) change our policies'
    TuningSettings."""
    first = oracle.counts[0]
    ours = with_overrides(TuningSettings(), overrides)
    if name == "static-mean":
        return Static(name, max(1, math.floor(oracle.mean_count + 0.5)))
    if name == "static-peak":
        return Static(name, max(oracle.counts))
    if name == "hpa-waiting":
        return Hpa(first)
    if name == "kpa-running":
        return Kpa(first, max(0.5, KNATIVE_UTILISATION * oracle.running_per_replica))
    if name == "wva-saturation":
        return Wva(first)
    if name == "ours-replicas":
        return Ours(name, "Off", first, settings=ours)
    if name == "ours-full":
        return Ours(name, "Auto", first, settings=ours)
    if name == "oracle-schedule":
        return OracleSchedule(tuple(oracle.counts), oracle.block)
    if name == "ours-reactive":  # an ablation, not run by default: ours-replicas, forecast off
        return Ours(name, "Off", first, settings=with_overrides(REACTIVE, overrides))
    if name == "ours-observed":  # an ablation, not run by default: ours-replicas, no model
        return Ours(name, "Off", first, settings=ours, model=False)
    raise ValueError(f"unknown policy {name!r}")


def _policy_job(
    scenario: Scenario, name: str, oracle: OracleResult, overrides: Overrides | None
) -> Outcome:
    return run_policy(scenario, make_policy(name, oracle, overrides), needed=oracle.count_at)


@dataclass
class ScenarioResult:
    scenario: Scenario
    oracle: OracleResult
    outcomes: dict[str, Outcome]


def run_all(
    scenarios: Iterable[Scenario],
    policies: Iterable[str] = (*POLICIES, *BOUNDS),
    jobs: int = 1,
    log: Callable[[str], None] | None = None,
    overrides: Overrides | None = None,
) -> list[ScenarioResult]:
    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    scenarios, policies = list(scenarios), list(policies)
    results: dict[tuple[str, int], ScenarioResult] = {}
    total, done = len(scenarios) * len(policies), 0
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        oracles = {(s.name, s.seed): pool.submit(search, s) for s in scenarios}
        pending: dict[Future[Outcome], tuple[tuple[str, int], str]] = {}
        for s in scenarios:
            key = (s.name, s.seed)
            oracle = oracles[key].result()
            say(
                f"oracle {s.name} seed {s.seed}: {oracle.counts} replicas per "
                f"{oracle.block:.0f}s block, {oracle.gpu_hours:.2f} GPU-h, {oracle.runs} block "
                f"runs, {oracle.wall_seconds:.0f}s"
            )
            results[key] = ScenarioResult(s, oracle, {})
            for name in policies:
                pending[pool.submit(_policy_job, s, name, oracle, overrides)] = (key, name)
        for future, (key, name) in pending.items():
            out = future.result()
            results[key].outcomes[name] = out
            done += 1
            say(
                f"[{done}/{total}] {key[0]} seed {key[1]} {name}: windows "
                f"{out.window_share:.1%}, 503 {out.rejected_share:.2%}, {out.gpu_hours:.2f} "
                f"GPU-h, {out.scaling_actions} scalings, {out.restarts} restarts, "
                f"{out.wall_seconds:.0f}s"
            )
    return [results[(s.name, s.seed)] for s in scenarios]


def with_seeds(scenarios: Iterable[Scenario], seeds: int) -> list[Scenario]:
    """Every scenario `seeds` times (Scenario.seeded), seeds of one scenario side by side."""
    return [s.seeded(k) for s in scenarios for k in range(seeds)]
