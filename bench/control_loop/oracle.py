"""The hindsight oracle: per block of the run, the fewest replicas that would have met the SLO.

Method. The run is cut into blocks (300 s by default). For each block the twin replays the
block's arrivals on n replicas that are ready from the start and never change, on the service
spec's flags, preceded by the minute of arrivals before the block (a lead-in, not scored, so the
block does not start on an idle fleet). The block passes when every 1-minute window in it meets
the SLO (measure.py) and its 503 share is within maxRejectionRatio. The search starts from the
previous block's count and goes down while the block passes, or up until it passes (the maximum
when none does: that block is marked infeasible). Fewer replicas never serve a block better here,
so the first failure going down ends the search.

What it is: a lower bound on the GPU-hours of a fleet that may change size every block, knowing
the future and paying no model load; not a policy. It is only as good as its block length (a
burst shorter than a block is provisioned for the whole block) and uses the spec's flags (a
retuned fleet can beat it).

Cost: about two block runs per block (the count that passes and the one below that fails), each
block plus the lead-in: some 2.4 runs of the scenario in all.
"""

from __future__ import annotations

import bisect
import math
import sys
import time
from dataclasses import dataclass, replace

from vllm_operator.sim.catalog import load_catalog
from vllm_operator.sim.engine import SimRequest
from vllm_operator.sim.fleet import Fleet
from vllm_operator.sim.runner import run

from .harness import BALANCER, engine_config
from .measure import is_503, window_stats
from .scenarios import MAX_REJECTION_RATIO, MIN_REPLICAS, Scenario

BLOCK = 300.0
LEAD_IN = 60.0
SAMPLE = 15.0  # seconds between fleet samples (4 make the busiest minute)


@dataclass(frozen=True)
class OracleResult:
    scenario: str
    block: float
    counts: list[int]  # replicas per block
    feasible: list[bool]  # False where even the profile's pod_cap missed the SLO
    gpu_hours: float
    runs: int  # block runs simulated
    running_per_replica: float  # the busiest minute's running requests per replica, when passing
    wall_seconds: float

    @property
    def mean_count(self) -> float:
        return sum(self.counts) / len(self.counts)

    def count_at(self, t: float) -> int:
        """The replicas the oracle runs at virtual time `t`: the pods the load needs then."""
        return self.counts[min(len(self.counts) - 1, max(0, int(t // self.block)))]


class _Blocks:
    def __init__(self, scenario: Scenario, block: float) -> None:
        self.scenario = scenario
        self.block = block
        self.requests = scenario.requests()
        self.arrivals = [r.arrival for r in self.requests]
        catalog = load_catalog()
        self.gpu = catalog.gpu(scenario.profile.gpu)
        self.model = catalog.model(scenario.profile.model)
        self.runs = 0

    def passes(self, index: int, replicas: int) -> tuple[bool, float]:
        """Whether `replicas` meet the SLO in block `index`; and running requests per replica."""
        self.runs += 1
        start = index * self.block
        end = min(start + self.block, self.scenario.duration)
        lead = max(0.0, start - LEAD_IN)
        lo, hi = bisect.bisect_left(self.arrivals, lead), bisect.bisect_left(self.arrivals, end)
        shifted: list[SimRequest] = [
            replace(r, arrival=r.arrival - lead) for r in self.requests[lo:hi]
        ]
        cfg = engine_config(self.scenario.profile.spec(replicas, "Off"))
        fleet = Fleet(cfg, self.gpu, self.model, replicas, balancer=BALANCER)
        result = run(shifted, fleet, end - lead, tick=SAMPLE)
        slo = self.scenario.profile.slo
        windows = window_stats(result.records, slo, start, end, offset=lead)
        scored = [r for r in result.records if r.arrival + lead >= start]
        rejected = sum(1 for r in scored if is_503(r))
        ok = all(w.met for w in windows) and rejected <= MAX_REJECTION_RATIO * len(scored)
        running = [s.running for s in result.samples if s.time + lead > start]
        # the busiest minute (KPA's stable window) per replica: what one replica held in SLO
        minutes = [sum(running[i : i + 4]) / 4 for i in range(max(1, len(running) - 3))]
        return ok, max(minutes, default=0.0) / replicas


def search(scenario: Scenario, block: float = BLOCK, progress: bool = False) -> OracleResult:
    started = time.perf_counter()
    blocks = _Blocks(scenario, block)
    n_blocks = max(1, math.ceil(scenario.duration / block - 1e-9))
    counts: list[int] = []
    feasible: list[bool] = []
    concurrency = 0.0
    n = min(2, scenario.profile.pod_cap)
    for index in range(n_blocks):
        ok, running = blocks.passes(index, n)
        while ok and n > MIN_REPLICAS:
            lower_ok, lower_running = blocks.passes(index, n - 1)
            if not lower_ok:
                break
            n, running = n - 1, lower_running
        while not ok and n < scenario.profile.pod_cap:
            n += 1
            ok, running = blocks.passes(index, n)
        counts.append(n)
        feasible.append(ok)
        if ok:
            concurrency = max(concurrency, running)
        if progress:
            print(f"  oracle {scenario.name} block {index}: {n} replicas", file=sys.stderr)
    span = [min(block, scenario.duration - i * block) for i in range(n_blocks)]
    gpu_hours = sum(c * s for c, s in zip(counts, span, strict=True)) / 3600
    return OracleResult(
        scenario=scenario.name,
        block=block,
        counts=counts,
        feasible=feasible,
        gpu_hours=gpu_hours,
        runs=blocks.runs,
        running_per_replica=concurrency,
        wall_seconds=time.perf_counter() - started,
    )
