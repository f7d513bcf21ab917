"""One configuration under one workload in the engine model: the figures of the json contract.

Open loop, per replica: a round-robin Service gives replica k of R the requests k, k+R, k+2R,
..., whatever happens to them, and the replicas do not interact, so replaying that share on one
engine is exactly what that replica of the fleet does. SIMULATED_REPLICAS of them are replayed
(k = 0, R/2, ...) and their requests pooled; fleet rates are theirs times R over that number.
A closed loop is driven against the whole fleet (its requests wait on each other). The
step-time model is the twin's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from vllm_operator.planning.candidate import Candidate, Target, resolve
from vllm_operator.planning.workload import CLOSED_ROUNDS, Arrivals, Workload, thin
from vllm_operator.sim import runner
from vllm_operator.sim.catalog import Catalog
from vllm_operator.sim.closedloop import ClosedLoopSpec, run_closed_loop
from vllm_operator.sim.engine import ResolvedConfig
from vllm_operator.sim.engine.reach import Reach
from vllm_operator.sim.fleet import Fleet
from vllm_operator.sim.report import Slo, latency, meets_slo, percentile
from vllm_operator.sim.workload import LengthDist

# The flags of the contract, by vLLM dest name, with the value vLLM runs (its default if unset).
CONTRACT_FLAGS = (
    "max_num_queued_reqs",
    "max_num_queued_tokens",
    "max_num_seqs",
    "max_num_active_seqs",
    "max_num_batched_tokens",
    "max_model_len",
    "tensor_parallel_size",
    "gpu_memory_utilization",
    "enable_chunked_prefill",
    "enable_prefix_caching",
)
SIMULATED_REPLICAS = 1


@dataclass(frozen=True)
class Setting:
    """What every evaluation of one plan shares."""

    catalog: Catalog
    model: str  # profile name
    target: Target
    costs: dict[str, float]  # $ per GPU-hour, by GPU type


@dataclass(frozen=True)
class Point:
    candidate: Candidate
    label: str  # how the search came to it
    flags: dict[str, Any]
    throughput_rps: float
    output_tokens_per_s: float
    ttft_p50_s: float
    ttft_p95_s: float
    itl_p95_s: float
    e2e_mean_s: float
    kv_usage_max: float
    preemptions: int
    rejected_share: float
    slo_attainment: float  # share of offered requests that met TTFT and their own ITL p95
    meets_slo: bool  # within the SLO less the margin
    gpu_hours_per_hour: float
    cost_per_hour: float | None

    def worst_ratio(self, target: Target) -> float:
        """The largest figure/limit ratio (<= 1 meets with the margin); inf when not measured."""
        ttft, itl, rej = target.limits()
        ratios = [_ratio(self.ttft_p95_s, ttft), _ratio(self.rejected_share, rej)]
        if itl is not None:
            ratios.append(_ratio(self.itl_p95_s, itl))
        return max(ratios)


def _ratio(value: float, limit: float) -> float:
    if math.isnan(value):
        return math.inf
    if limit <= 0:
        return 0.0 if value <= 0 else math.inf
    return value / limit


def contract_flags(res: ResolvedConfig) -> dict[str, Any]:
    return {name: getattr(res, name) for name in CONTRACT_FLAGS}


@dataclass(frozen=True)
class _Raw:
    throughput: float
    output_tps: float
    ttft: list[float]
    itl: list[float]
    e2e: list[float]
    offered: int
    rejected: int
    good: int
    kv_max: float
    preemptions: int


def evaluate(
    c: Candidate, workload: Workload, arrivals: Arrivals | None, s: Setting, label: str
) -> Point:
    """Figures of `c`; `arrivals` for an open loop (None for a closed one).

    Raises ValueError (vLLM's start-up message) when vLLM would not start with `c`.
    """
    res = resolve(c, s.catalog, s.model)
    raw = _closed(c, workload, s) if arrivals is None else _open(c, arrivals, s)[0]
    assert raw is not None  # nothing stops the replay
    return _point(c, res, raw, s, label)


def evaluate_unless_missed(
    c: Candidate, workload: Workload, arrivals: Arrivals, s: Setting, label: str
) -> tuple[Point | None, Reach]:
    """evaluate() of an open loop, or None as soon as the replay's records make a miss of
    s.target certain, whatever the rest of it would hold (_MissWatch): a search's probes above
    what a pod serves are most of its replays, and their overload is the dearest part of each.
    With it, what the replay's budget comparisons saw up to where it ended (sim/engine/reach.py):
    a candidate whose budgets make each of them come out the same has the same verdict.

    Raises ValueError (vLLM's start-up message) when vLLM would not start with `c`.
    """
    res = resolve(c, s.catalog, s.model)
    raw, reach = _open(c, arrivals, s, watch=True)
    return (None if raw is None else _point(c, res, raw, s, label)), reach


def _point(c: Candidate, res: ResolvedConfig, raw: _Raw, s: Setting, label: str) -> Point:
    ttft, itl = latency(raw.ttft), latency(raw.itl)
    share = raw.rejected / raw.offered if raw.offered else 0.0
    point = Point(
        candidate=c,
        label=label,
        flags=contract_flags(res),
        throughput_rps=raw.throughput,
        output_tokens_per_s=raw.output_tps,
        ttft_p50_s=ttft.p50,
        ttft_p95_s=ttft.p95,
        itl_p95_s=itl.p95,
        e2e_mean_s=latency(raw.e2e).mean,
        kv_usage_max=raw.kv_max,
        preemptions=raw.preemptions,
        rejected_share=share,
        slo_attainment=raw.good / raw.offered if raw.offered else 0.0,
        meets_slo=False,
        gpu_hours_per_hour=float(c.gpus),
        cost_per_hour=c.gpus * s.costs[c.gpu] if c.gpu in s.costs else None,
    )
    ok = point.worst_ratio(s.target) <= 1.0 and not math.isnan(point.ttft_p95_s)
    return replace(point, meets_slo=ok)


def _slo(target: Target) -> Slo:
    return Slo(target.ttft, target.itl if target.itl is not None else math.inf)


class _MissWatch:
    """Whether the records of a replay so far make a miss of the target's limits certain: the
    TTFT p95, the ITL p95 or the 503 share over its limit (Point.meets_slo false) whatever the
    rest of the replay holds. The figures are over the counted requests, at most `most` of them,
    and their inter-token gaps, at most max_tokens - 1 a request.

    The p95 of n values is the value at rank floor(0.95 (n - 1)) or above it (sim/report.py's
    percentile interpolates upward), so it is over the limit once n - floor(0.95 (n - 1)) values
    are, a count that grows with n: reached at the most there can be, it is reached at whatever n
    the replay ends with. The 503 share's denominator is at most `most`, and its rejections only
    grow. SLACK keeps "over" clear of a ratio that rounds to the limit.
    """

    SLACK = 1e-9

    def __init__(self, target: Target, shares: Sequence[Arrivals]) -> None:
        ttft, itl, rejection = target.limits()
        counted = [r for a in shares for r in a.requests if r.arrival >= a.count_from]
        most = sum(r.n for r in counted)
        most_gaps = sum(r.n * max(0, r.max_tokens - 1) for r in counted)
        self.ttft_over = ttft * (1 + self.SLACK)
        self.itl_over = None if itl is None else itl * (1 + self.SLACK)
        self.late_needed = _over_p95(most)
        self.slow_needed = _over_p95(most_gaps)
        self.rejected_needed = (
            math.floor(rejection * (1 + self.SLACK) * most) + 1 if rejection > 0 else 1
        )
        self.late = self.rejected = self.slow = 0

    def follow(self, count_from: float) -> Callable[[Sequence[runner.RunRecord]], bool]:
        """The `stop` of one replica's run (runner.run), counting into this watch."""
        seen = 0

        def missed(records: Sequence[runner.RunRecord]) -> bool:
            nonlocal seen
            for r in records[seen:]:
                if r.arrival < count_from:
                    continue
                if r.record is None:
                    self.rejected += r.outcome == "rejected"
                else:
                    self.late += r.record.ttft > self.ttft_over
                    if self.itl_over is not None:  # no ITL target: no gap can miss it
                        self.slow += sum(1 for gap in r.record.itls if gap > self.itl_over)
            seen = len(records)
            return (
                self.late >= self.late_needed
                or self.slow >= self.slow_needed
                or self.rejected >= self.rejected_needed
            )

        return missed


def _over_p95(most: int) -> float:
    """How many of at most `most` values over a limit put their p95 over it (_MissWatch)."""
    return most - math.floor(95 / 100 * (most - 1)) if most else math.inf


def _open(
    c: Candidate, arrivals: Arrivals, s: Setting, watch: bool = False
) -> tuple[_Raw | None, Reach]:
    """The pooled figures of the replicas replayed (None when `watch` stopped them at a certain
    miss), and what their budget comparisons saw."""
    gpu, model = s.catalog.gpu(c.gpu), s.catalog.model(s.model)
    sims = min(c.replicas, SIMULATED_REPLICAS)
    offsets = [k * c.replicas // sims for k in range(sims)]
    slo = _slo(s.target)
    ttft: list[float] = []
    itl: list[float] = []
    e2e: list[float] = []
    offered = rejected = good = completed = output = preemptions = 0
    kv_max, last = 0.0, arrivals.until
    shares = [thin(arrivals, c.replicas, offset) for offset in offsets]
    misses = _MissWatch(s.target, shares) if watch else None
    reach = Reach()
    for share in shares:
        fleet = Fleet(c.engine_config(), gpu, model, 1, coeffs=s.catalog.coefficients)
        stop = None if misses is None else misses.follow(share.count_from)
        result = runner.run(
            share.requests, fleet, share.until, tick=max(share.until, 1.0), stop=stop
        )
        for rep in (*fleet.live, *fleet.retired):
            reach = reach.merge(rep.engine.reach())
        if result.stopped:
            return None, reach
        counted = [r for r in result.records if r.arrival >= arrivals.count_from]
        done = [r.record for r in counted if r.record is not None]
        offered += len(counted)
        rejected += len(counted) - len(done)  # 503s, 400s and (never with drain) unfinished
        good += sum(1 for r in done if meets_slo(r, slo))
        completed += len(done)
        output += sum(r.output_tokens for r in done)
        ttft += [r.ttft for r in done]
        e2e += [r.e2e for r in done]
        itl += [gap for r in done for gap in r.itls]
        last = max([last, *(r.finished for r in done)])
        stats = [rep.engine.stats() for rep in (*fleet.live, *fleet.retired)]
        kv_max = max([kv_max, *(st.kv_usage_peak for st in stats)])
        preemptions += sum(st.preemptions for st in stats)
    window = max(last - arrivals.count_from, 1e-9)
    scale = c.replicas / sims
    raw = _Raw(
        throughput=completed / window * scale,
        output_tps=output / window * scale,
        ttft=ttft,
        itl=itl,
        e2e=e2e,
        offered=offered,
        rejected=rejected,
        good=good,
        kv_max=kv_max,
        preemptions=round(preemptions * scale),
    )
    return raw, reach


def _closed(c: Candidate, w: Workload, s: Setting) -> _Raw:
    assert w.concurrency is not None
    if not isinstance(w.prompt, LengthDist) or not isinstance(w.output, LengthDist):
        raise ValueError("a closed loop takes parametric lengths (fixed, exp, lognormal, uniform)")
    fleet = Fleet(
        c.engine_config(),
        s.catalog.gpu(c.gpu),
        s.catalog.model(s.model),
        c.replicas,
        coeffs=s.catalog.coefficients,
    )
    n = w.concurrency
    spec = ClosedLoopSpec(n, max(CLOSED_ROUNDS * n, 200), w.prompt, w.output, n, w.seed)
    samples = [x for x in run_closed_loop(spec, fleet) if x.counted]
    ok = [x for x in samples if x.ok and x.ttft is not None]
    slo = _slo(s.target)
    good = sum(
        1
        for x in ok
        if x.ttft is not None
        and x.ttft <= slo.ttft
        and (not x.itls or percentile(sorted(x.itls), 95) <= slo.itl)
    )
    span = max(x.end for x in samples) - min(x.start for x in samples) if samples else 0.0
    span = span if span > 0 else math.nan
    stats = [rep.engine.stats() for rep in (*fleet.live, *fleet.retired)]
    return _Raw(
        throughput=len(ok) / span,
        output_tps=sum(x.output_tokens for x in ok) / span,
        ttft=[x.ttft for x in ok if x.ttft is not None],
        itl=[gap for x in ok for gap in x.itls],
        e2e=[x.e2el for x in ok],
        offered=len(samples),
        rejected=len(samples) - len(ok),
        good=good,
        kv_max=max((st.kv_usage_peak for st in stats), default=0.0),
        preemptions=sum(st.preemptions for st in stats),
    )
