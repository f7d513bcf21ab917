"""The search: start where the layers' meaning puts each knob, then move one layer at a time.

Per GPU type: the fewest replicas that meet the SLO (with the margin) from the layer-derived
start and from vLLM's defaults; then, one knob at a time (seqs, token budget, entry valve; halved
or doubled, the valve also removed), whether a neighbour holds the SLO on one replica fewer, and
which configuration at the final count keeps the most requests within the SLO. A long workload is
searched on its busiest slice and the winner checked on the whole of it (one replica more until
it holds). Every candidate is a VLLMService the API model and the renderer accept and a
configuration vLLM starts with; the others are recorded as skipped, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from vllm_operator.planning.candidate import Candidate, build_service, check_service, resolve
from vllm_operator.planning.evaluate import Point, Setting, evaluate, evaluate_unless_missed
from vllm_operator.planning.seeds import Start, derive_start
from vllm_operator.planning.workload import Arrivals, Stats, Workload
from vllm_operator.sim.engine.reach import Reach
from vllm_operator.sim.engine.steptime import StepTimeModel

Progress = Callable[[str], None]
MAX_TP = 8
WHOLE = "whole workload"  # the label of a check on the whole workload


class NoPlanError(ValueError):
    """Nothing evaluated meets the SLO; `closest` is the nearest point, the message says why."""

    def __init__(self, message: str, closest: Point | None) -> None:
        super().__init__(message)
        self.closest = closest


@dataclass
class Plan:
    gpu: str
    points: list[Point]  # every evaluation, in order
    recommendation: Point  # on the whole workload
    defaults: Point | None  # vLLM's defaults at the recommendation's replica count (search scope)
    start: Start | None
    skipped: list[tuple[Candidate, str]] = field(default_factory=list)


@dataclass
class Search:
    setting: Setting
    workload: Workload
    scope: Arrivals | None  # what candidates are searched on (None: a closed loop)
    whole: Arrivals | None  # the whole workload when `scope` is a slice of it, else None
    max_replicas: int
    progress: Progress | None = None
    points: list[Point] = field(default_factory=list)
    skipped: list[tuple[Candidate, str]] = field(default_factory=list)
    _cache: dict[tuple[Candidate, bool], Point | None] = field(default_factory=dict)

    def evaluate(self, c: Candidate, label: str, *, whole: bool = False) -> Point | None:
        key = (c, whole)
        if key in self._cache:
            return self._cache[key]
        point: Point | None = None
        reason = self.refused(c)
        if reason is None:
            try:
                arrivals = self.whole if whole else self.scope
                point = evaluate(c, self.workload, arrivals, self.setting, label)
            except ValueError as exc:
                reason = str(exc)
        if point is None:
            self.skipped.append((c, reason or "refused"))
            self._say(f"skip {describe(c)}: {reason}")
        else:
            self.points.append(point)
            verdict = "meets" if point.meets_slo else "misses"
            self._say(
                f"{label}: {describe(c)}: {verdict} the SLO "
                f"(TTFT p95 {point.ttft_p95_s * 1000:.0f} ms, ITL p95 "
                f"{point.itl_p95_s * 1000:.1f} ms, 503 {point.rejected_share:.1%})"
            )
        self._cache[key] = point
        return point

    def refused(self, c: Candidate) -> str | None:
        """Why `c` is no VLLMService the API model and the renderer accept, or None."""
        return check_service(
            build_service(c, model="plan", name="plan", namespace=None, target=self.setting.target)
        )

    def evaluate_unless_missed(self, c: Candidate) -> tuple[Point | None, Reach]:
        """evaluate(c)'s point on the scope (an open loop), or None when its replay stops at a
        certain miss (evaluate.evaluate_unless_missed), with what the replay's budget
        comparisons saw: a verdict, neither recorded nor cached, for a candidate that is not
        refused() and that vLLM starts with (else ValueError)."""
        assert self.scope is not None, "a closed loop's replay runs to its end"
        return evaluate_unless_missed(c, self.workload, self.scope, self.setting, "verdict")

    def _say(self, text: str) -> None:
        if self.progress is not None:
            self.progress(text)

    def meets(self, c: Candidate, label: str) -> bool:
        point = self.evaluate(c, label)
        return point is not None and point.meets_slo

    def fewest_replicas(self, c: Candidate, guess: int, label: str) -> Candidate | None:
        """`c` at the fewest replicas in [1, max] that meet the SLO (monotone in replicas)."""
        guess = min(max(guess, 1), self.max_replicas)

        def at(n: int) -> Candidate:
            return replace(c, replicas=n)

        if self.meets(at(guess), label):
            hi, step = guess, 1
            while hi - step >= 1 and self.meets(at(hi - step), label):
                hi, step = hi - step, step * 2
            lo = max(hi - step, 0)  # fails (or 0)
        else:
            lo, step = guess, 1
            while True:
                if lo == self.max_replicas:
                    return None
                nxt = min(lo + step, self.max_replicas)
                if self.meets(at(nxt), label):
                    hi = nxt
                    break
                lo, step = nxt, step * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.meets(at(mid), label):
                hi = mid
            else:
                lo = mid
        return at(hi)


def describe(c: Candidate) -> str:
    flags = " ".join(f"{d}={v}" for d, v in c.budgets) or "vLLM defaults"
    return f"{c.replicas} x {c.gpu}{f' (tp {c.tp})' if c.tp > 1 else ''}, {flags}"


def neighbours(c: Candidate, default_seqs: int) -> list[tuple[str, Candidate]]:
    """One layer changed at a time: halved, doubled, and the entry valve also removed."""
    out: list[tuple[str, Candidate]] = []
    seqs = c.budget("max_num_seqs") or default_seqs
    budget = c.budget("max_num_batched_tokens")
    for s in (seqs // 2, min(seqs * 2, default_seqs)):
        if s >= 1 and s != seqs and (budget is None or budget >= s):
            out.append(("running layer", c.with_budgets(max_num_seqs=s)))
    if budget is not None:
        for b in (max(budget // 2, seqs), budget * 2):
            if b != budget:
                out.append(("token budget", c.with_budgets(max_num_batched_tokens=b)))
    reqs, tokens = c.budget("max_num_queued_reqs"), c.budget("max_num_queued_tokens")
    if reqs is not None or tokens is not None:
        out.append(
            ("entry valve", c.with_budgets(max_num_queued_reqs=None, max_num_queued_tokens=None))
        )
        for f in (0.5, 2.0):
            out.append(
                (
                    "entry valve",
                    c.with_budgets(
                        max_num_queued_reqs=max(seqs, round(reqs * f)) if reqs else None,
                        max_num_queued_tokens=max(1, round(tokens * f)) if tokens else None,
                    ),
                )
            )
    return out


def rank(point: Point, setting: Setting) -> tuple[float, float, float]:
    """Smaller is better: cost, then the share of requests outside the SLO, then the margin."""
    cost = point.cost_per_hour if point.cost_per_hour is not None else point.gpu_hours_per_hour
    return (cost, -point.slo_attainment, point.worst_ratio(setting.target))


def base_candidate(gpu: str, setting: Setting, stats: Stats) -> Candidate:
    """TP and context length vLLM starts with: the defaults, else the workload's longest
    request as max-model-len, then more GPUs per replica; ValueError when nothing starts."""
    model = setting.catalog.model(setting.model)
    longest = min(model.max_model_len, math.ceil(stats.total_max / 1024) * 1024)
    problem = ""
    tp = 1
    while tp <= MAX_TP:
        for mml in (None, longest):
            c = Candidate(gpu, 1, tp=tp, max_model_len=mml)
            try:
                resolve(c, setting.catalog, setting.model)
                return c
            except ValueError as exc:
                problem = str(exc)
        tp *= 2
    raise ValueError(f"{setting.model} does not start on {gpu} with up to {MAX_TP} GPUs: {problem}")


def start_candidate(base: Candidate, stats: Stats, setting: Setting) -> tuple[Candidate, Start]:
    res = resolve(base, setting.catalog, setting.model)
    timer = StepTimeModel(
        setting.catalog.gpu(base.gpu),
        setting.catalog.model(setting.model),
        tp=res.tensor_parallel_size,
        kv_bytes_per_token=res.kv_bytes_per_token,
        coeffs=setting.catalog.coefficients,
    )
    start = derive_start(stats, res, timer, setting.target)
    c = base.with_budgets(
        max_num_seqs=start.max_num_seqs,
        max_num_batched_tokens=start.max_num_batched_tokens,
        max_num_queued_reqs=start.max_num_queued_reqs,
        max_num_queued_tokens=start.max_num_queued_tokens,
    )
    return replace(c, replicas=start.replicas), start


def search_gpu(search: Search, gpu: str, stats: Stats) -> Plan:
    """The cheapest configuration on `gpu` that meets the SLO; NoPlanError if none does."""
    setting = search.setting
    base = base_candidate(gpu, setting, stats)
    default_seqs = resolve(base, setting.catalog, setting.model).max_num_seqs
    seed, start = start_candidate(base, stats, setting)
    if search.workload.kind == "closed":
        assert search.workload.concurrency is not None
        guess = math.ceil(search.workload.concurrency / start.max_num_seqs)
        seed = replace(seed, replicas=guess)
    found = [
        c
        for c in (
            search.fewest_replicas(seed, seed.replicas, "start"),
            search.fewest_replicas(base, seed.replicas, "vLLM defaults"),
        )
        if c is not None
    ]
    if not found:
        raise _no_plan(search, gpu)
    best = min(found, key=lambda c: (c.gpus, rank(_point(search, c), setting)))
    while best.replicas > 1:  # one layer at a time on one replica fewer
        fewer = replace(best, replicas=best.replicas - 1)
        better = next(
            (n for label, n in neighbours(fewer, default_seqs) if search.meets(n, label)), None
        )
        if better is None:
            break
        best = better
    for label, n in neighbours(best, default_seqs):
        search.evaluate(n, label)
    return _finish(search, gpu, best, base, start)


def search_sweep(search: Search, gpu: str, stats: Stats, knob: str, values: Sequence[int]) -> Plan:
    """`knob` on a fixed grid, every other flag at vLLM's default, each at its fewest replicas."""
    base = base_candidate(gpu, search.setting, stats)
    _, start = start_candidate(base, stats, search.setting)
    found = []
    for value in values:
        c = search.fewest_replicas(
            base.with_budgets(**{knob: value}), start.replicas, f"sweep {knob}={value}"
        )
        if c is not None:
            found.append(c)
    if not found:
        raise _no_plan(search, gpu)
    best = min(found, key=lambda c: rank(_point(search, c), search.setting))
    return _finish(search, gpu, best, base, start)


def _point(search: Search, c: Candidate) -> Point:
    point = search.evaluate(c, "")
    assert point is not None
    return point


def _finish(search: Search, gpu: str, best: Candidate, base: Candidate, start: Start) -> Plan:
    setting = search.setting
    same = [
        p
        for p in search.points
        if p.candidate.gpu == gpu and p.candidate.gpus == best.gpus and p.meets_slo
    ]
    chosen = min(same, key=lambda p: rank(p, setting)).candidate
    defaults = search.evaluate(replace(base, replicas=chosen.replicas), "vLLM defaults")
    recommendation = _check_whole(search, chosen)
    return Plan(gpu, search.points, recommendation, defaults, start, search.skipped)


def _check_whole(search: Search, c: Candidate) -> Point:
    """`c` on the whole workload, one replica more until it holds there too."""
    if search.whole is None:
        return _point(search, c)
    while True:
        point = search.evaluate(c, WHOLE, whole=True)
        if point is not None and point.meets_slo:
            return point
        if c.replicas >= search.max_replicas:
            raise NoPlanError(
                f"{describe(c)} meets the SLO on the busiest slice but not on the whole "
                f"workload, and --max-replicas {search.max_replicas} allows no more",
                point,
            )
        c = replace(c, replicas=c.replicas + 1)


def _no_plan(search: Search, gpu: str) -> NoPlanError:
    points = [p for p in search.points if p.candidate.gpu == gpu]
    if not points:
        return NoPlanError(f"no configuration on {gpu} could be evaluated", None)
    target = search.setting.target
    closest = min(points, key=lambda p: (p.worst_ratio(target), p.gpu_hours_per_hour))
    return NoPlanError(what_it_takes(closest, search), closest)


def what_it_takes(closest: Point, search: Search) -> str:
    """The closest point, and the SLO it would meet (or the replicas it needs)."""
    target = search.setting.target
    if math.isnan(closest.ttft_p95_s):  # no latency to scale: every request was refused
        return (
            f"no configuration meets the SLO: no request completed, even on the closest, "
            f"{describe(closest.candidate)} (503 {closest.rejected_share:.1%})"
        )
    keep = 1 - target.margin
    needs = [f"--slo-ttft {math.ceil(closest.ttft_p95_s / keep * 1000)}ms"]
    if target.itl is not None and not math.isnan(closest.itl_p95_s):
        needs.append(f"--slo-itl {math.ceil(closest.itl_p95_s / keep * 1000)}ms")
    if closest.rejected_share > target.max_rejection * keep:
        needs.append(f"--max-rejection-ratio {closest.rejected_share / keep:.3f}")
    more = (
        f", or more than --max-replicas {search.max_replicas}"
        if closest.candidate.replicas >= search.max_replicas
        else ""
    )
    return (
        f"no configuration meets the SLO with its {target.margin:.0%} margin; closest: "
        f"{describe(closest.candidate)} (TTFT p95 {closest.ttft_p95_s * 1000:.0f} ms, ITL p95 "
        f"{closest.itl_p95_s * 1000:.1f} ms, 503 {closest.rejected_share:.1%}); it would take "
        f"{' '.join(needs)}{more}"
    )
