"""A budget move chosen by the engine model in one step, made only when it pays for its restarts.

When the figures show a problem (503s over budget, TTFT or ITL over SLO, preemptions) and a
budget change may be made now (no cooldown, restart budget left), the planner's evaluation
(planning/evaluate.py, the pure engine model) replays the observed workload on one pod of the
fleet: the budgets in force, then each budget the tuner may move (never maxSeqs) at the values
of its allowed range (limits.allowed_range: spec.autotune.bounds, vLLM's cross-field rules),
one field at a time ("change one layer at a time"). Every value is checked the way the planner
checks its candidates (planning/candidate.py: the CRD's rules, the renderer, vLLM's start-up).
The best value is the target, straight away: no x2 steps over several cooldowns. No value that
refuses more than the SLO's 503 budget is a target (best_move).

The move pays when the requests it is predicted to bring into the SLO over `retune_payback`
outweigh those its restarts take out of it, twice (UNDO_FACTOR): one pod at a time is down for
the pods' ready time (status.tuning.readyTime) while the others carry its load, which the model
replays too (one pod fewer; a single pod serves nothing while it restarts), and should rule 1
judge the move worse, the rollback rolls the same way. The model's sums err both ways; a move
that paid by 4% in them (a GPU-capped L4 service at its diurnal peak, bench
l4-3b-gpus2/diurnal seed 8) was judged worse and rolled back, two pod-by-pod rollouts at the
peak for nothing. A rollout that surges costs nothing, undone or not.
A value counts only if it brings MIN_GAIN more of the requests into the SLO. When no move pays
the x2 budget remedies of the rules are blocked too: they restart the same pods for what the
model predicts is less. Where replicas can still be added a replica fixes the problem, in one
pod's ready time and without a restart; where the replica lever is capped (maxReplicas, the
cluster's free GPUs, autoscaling off) nothing the tuner can do pays, and it holds, saying so:
on a GPU-capped L4 service at its diurnal peak (bench l4-3b-gpus2/diurnal) the x2 steps the
model would not make, rolled pod by pod and rolled back, took 4 seeds of 5 from 70% of windows
in SLO to 53%. With autotune.canary on, the rules' steps stay at the cap: a step then runs on
one extra pod beside the others and is removed if worse, so trying it risks one pod, not a
rollout and a rollback of every pod, and the model's sums are only a model. Where the model
cannot judge (a figure missing, a GPU or model the catalog lacks, a problem it does not
reproduce) the rules' own steps stay the last lever too, judged by rule 1 or a canary. The
message of a move names the cap when there is one.

The observed workload is tuning/observed_workload.py's: Poisson arrivals at the snapshot's
rate, with the prompt and output lengths of vLLM's token histograms; one pod's round-robin
share of them is replayed. Where the snapshot has no histograms, the mean prompt length
(lognormal, sigma 1 around it) and a mean output length estimated by Little's law from the
running requests, the finish rate and ITL p95 (running time per request / time per token) stand
in. Results are memoised on the workload with its rate rounded: the same figures give the same
answer without a replay.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache

from vllm_operator.api.budgets import BUDGETS_BY_KEY, budget_change
from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.planning.candidate import Candidate, Target, resolve
from vllm_operator.planning.evaluate import Point, Setting
from vllm_operator.planning.search import Search
from vllm_operator.planning.workload import Arrivals, Workload, build_arrivals
from vllm_operator.sim.catalog import packaged_catalog
from vllm_operator.sim.workload import LengthDist
from vllm_operator.tuning import signals
from vllm_operator.tuning.forecast import ready_horizon
from vllm_operator.tuning.inputs import Inputs, canary_on, spec_budget
from vllm_operator.tuning.limits import allowed_range, apply_budget, retune_blocker
from vllm_operator.tuning.model import BudgetKey, Decision
from vllm_operator.tuning.observed_workload import ServiceLoad, burst_size, observed_workload
from vllm_operator.tuning.outcome import Blocked, Move, act
from vllm_operator.tuning.problem_wait import has_problem, replicas_capped, window_wait
from vllm_operator.tuning.reasons import Reason
from vllm_operator.tuning.rollout_room import rollout_blocker
from vllm_operator.tuning.same_replays import SameReplays

MOVABLE: tuple[BudgetKey, ...] = (
    "maxRequests",
    "maxPrefillTokens",
    "maxActiveSeqs",
    "maxBatchedTokens",
)
_SAME = SameReplays()  # the operator's one copy, shared by its passes
HORIZON = 120.0  # seconds of arrivals replayed per evaluation (after a 30 s warm-up)
MIN_BURSTS = 20  # bursts a bursty workload's replay holds at least ...
MAX_HORIZON = 600.0  # ... within this many seconds
FACTORS = (0.125, 0.25, 0.5, 2.0, 4.0, 8.0)  # the grid around the value in force
OUTPUT_RANGE = (16, 4096)  # the estimated mean output length is clamped inside it
PROMPT_SIGMA = 1.0
MIN_GAIN = 0.01  # a value must bring at least 1% more of the requests into the SLO to count


@dataclass(frozen=True)
class Predicted:
    """What the engine model predicts for one configuration under the observed workload."""

    rejected_share: float
    ttft_p95: float  # seconds
    itl_p95: float
    per_pod: float  # requests/s one pod completes
    attainment: float  # share of offered requests within the SLO (503s count as misses)

    def phrase(self) -> str:
        return (
            f"503 {self.rejected_share:.1%}, TTFT p95 {self.ttft_p95:.2f}s, "
            f"ITL p95 {self.itl_p95 * 1000:.0f}ms, {self.attainment:.0%} in SLO, "
            f"{self.per_pod:.2f}/s per pod"
        )


UNDO_FACTOR = 2.0  # a pod-by-pod move pays for its rollout and for the rollback's (module doc)


@dataclass(frozen=True)
class RetuneMove:
    """The model's best one-field move for the observed workload, and whether it pays."""

    field: BudgetKey
    from_value: int
    to_value: int
    current: Predicted
    target: Predicted
    gain: float  # requests brought into the SLO over the payback horizon
    cost: float  # requests the rolling restart puts at risk
    capped: str | None  # why replicas cannot fix the problem, None when they can
    surge: bool = False  # a GPU of the type is free: the rollout surges and costs nothing

    @property
    def pays(self) -> bool:
        return self.gain > UNDO_FACTOR * self.cost

    def effect(self) -> str:
        """The predicted effect, current against target, and the payback sum."""
        risk = (
            "none at risk in the restarts (a GPU of the type is free: the rollout surges)"
            if self.surge
            else f"{self.cost:.0f} at risk in the restarts ({UNDO_FACTOR * self.cost:.0f} with "
            "a rollback's)"
        )
        return (
            f"the engine model predicts {self.target.phrase()}, against {self.current.phrase()} "
            f"now; {self.gain:.0f} more requests in SLO over the payback against {risk}"
        )

    def phrase(self) -> str:
        return f"{budget_change(self.field, self.from_value, self.to_value)}: {self.effect()}"


@dataclass(frozen=True)
class Verdict:
    """The model's prediction for the budgets in force, and its best move (None: no value
    brings MIN_GAIN more of the requests into the SLO)."""

    current: Predicted
    move: RetuneMove | None


def _round2(x: float) -> float:
    """Two significant digits."""
    if x <= 0:
        return 0.0
    digits = 1 - math.floor(math.log10(x))
    return round(x, digits)


def observed_load(i: Inputs) -> Workload | None:
    """The fleet's workload, rate rounded, in the fleet's bursts; None when a figure it needs is
    missing. The engine model replays one pod's round-robin share of it (planning/evaluate.py),
    which is what a Service gives a pod: steadier than Poisson arrivals at the per-pod rate, and
    a part of each burst."""
    load = observed_workload(i.spec, i.snapshot, i.pods)
    burst = burst_size(i.snapshot.arrival_dispersion)  # the fleet's: a replica gets its share
    if isinstance(load, ServiceLoad):
        w = load.workload
        fleet_rate = _round2((w.rate or 0.0) * load.pods)
        return replace(w, rate=fleet_rate, burst=burst, horizon=_horizon(fleet_rate, burst))
    snap = i.snapshot
    rate, prompt = snap.request_rate, snap.prompt_tokens_per_request
    done, running, itl = snap.admitted_rate, snap.running, snap.itl_p95
    if not rate or not prompt or not done or running is None or not itl:
        return None
    # Little's law: seconds a request runs = running / finish rate; tokens = that / ITL
    output = _round2(min(OUTPUT_RANGE[1], max(OUTPUT_RANGE[0], running / done / itl)))
    cap = _prompt_cap(i.spec)
    return Workload(
        "poisson",
        "observed",
        rate=_round2(rate),
        prompt=LengthDist("lognormal", _round2(prompt), PROMPT_SIGMA, cap=cap),
        output=LengthDist("lognormal", output, PROMPT_SIGMA, cap=OUTPUT_RANGE[1]),
        horizon=_horizon(_round2(rate), burst),
        burst=burst,
    )


def _horizon(rate: float, burst: float) -> float:
    """HORIZON, or for bursty arrivals long enough to hold MIN_BURSTS bursts (MAX_HORIZON at
    most): a few bursts more or fewer would decide a p95 otherwise."""
    if burst == 1 or rate <= 0:
        return HORIZON
    return min(MAX_HORIZON, max(HORIZON, MIN_BURSTS * burst / rate))


def candidate_of(spec: VLLMServiceSpec, overrides: dict[str, int], replicas: int) -> Candidate:
    """The configuration the pods run: spec budgets with the overrides in force."""
    budgets: dict[str, int | None] = {}
    for key, f in BUDGETS_BY_KEY.items():
        value = overrides.get(key, spec_budget(spec, key))
        budgets[f.dest] = value
    engine = spec.engine
    tp = spec.gpu.count
    if engine is not None and engine.tensor_parallel_size is not None:
        tp = engine.tensor_parallel_size
    mml = None if engine is None else engine.max_model_len
    base = Candidate(spec.gpu.type, max(1, replicas), tp=tp, max_model_len=mml)
    return base.with_budgets(**budgets)


def values_around(current: int, lo: int, hi: int) -> list[int]:
    grid = {lo, hi, *(round(current * f) for f in FACTORS)}
    return sorted(v for v in grid if lo <= v <= hi and v != current)


@lru_cache(maxsize=4096)
def predict(c: Candidate, model: str, target: Target, load: Workload) -> Predicted | None:
    """The engine model's figures for `c` under `load`; None when `c` is refused (the CRD, the
    renderer or vLLM's start-up) or the model does not know the GPU or model."""
    search = _search(c, model, target, load)
    point = None if search is None else search.evaluate(c, "observed")
    return None if point is None else _predicted(point, c.replicas)


@lru_cache(maxsize=4096)
def predict_within(c: Candidate, model: str, target: Target, load: Workload) -> bool:
    """within(predict(...), target), the replay stopped as soon as a miss is certain
    (planning/evaluate.py, evaluate_unless_missed): a search for what a pod serves replays rates
    above it, and each such replay's overload is the dearest part of it. A configuration that
    would replay the same as one already replayed takes its verdict (tuning/same_replays.py)."""
    # the replay is watched against the limits `within` judges by: the SLO itself
    search = _search(c, model, replace(target, margin=0.0), load)
    if search is None or search.refused(c) is not None:
        return False
    try:
        res = resolve(c, search.setting.catalog, model)
    except ValueError:  # vLLM would not start with it
        return False
    setting = (replace(c, budgets=()), model, target, load)
    verdict = _SAME.find(setting, res)
    if verdict is None:
        point, reach = search.evaluate_unless_missed(c)
        verdict = point is not None and within(_predicted(point, c.replicas), target)
        _SAME.add(setting, res, reach, verdict)
    return verdict


def _search(c: Candidate, model: str, target: Target, load: Workload) -> Search | None:
    """One replay's search of `load`; None when the model does not know the GPU or model."""
    catalog = packaged_catalog()
    try:
        catalog.gpu(c.gpu)
        catalog.model(model)
    except KeyError:
        return None
    return Search(Setting(catalog, model, target, {}), load, _arrivals(load), None, c.replicas)


@lru_cache(maxsize=64)
def _arrivals(load: Workload) -> Arrivals:
    """`load`'s requests: a look replays one load for each of a few dozen configurations."""
    return build_arrivals(load)


def _prompt_cap(spec: VLLMServiceSpec) -> int:
    mml = (spec.engine.max_model_len if spec.engine is not None else None) or 8192
    return max(1, mml - OUTPUT_RANGE[1])


def _predicted(p: Point, replicas: int) -> Predicted:
    return Predicted(
        rejected_share=p.rejected_share,
        ttft_p95=p.ttft_p95_s if not math.isnan(p.ttft_p95_s) else math.inf,
        itl_p95=p.itl_p95_s if not math.isnan(p.itl_p95_s) else math.inf,
        per_pod=p.throughput_rps / replicas,
        attainment=p.slo_attainment,
    )


def slo_target(i: Inputs) -> Target | None:
    t = i.targets
    if t.ttft is None:
        return None
    return Target(t.ttft, t.itl, t.max_rejection_ratio, margin=0.0)


def model_knows(i: Inputs) -> bool:
    """The engine model can judge this service: an SLO to judge by, the GPU and model known."""
    catalog = packaged_catalog()
    try:
        catalog.gpu(i.spec.gpu.type)
        catalog.model(i.spec.model)
    except KeyError:
        return False
    return slo_target(i) is not None


def within(p: Predicted, t: Target) -> bool:
    itl_ok = t.itl is None or p.itl_p95 <= t.itl
    return p.rejected_share <= t.max_rejection and p.ttft_p95 <= t.ttft and itl_ok


def held(i: Inputs, key: BudgetKey, direction: str) -> bool:
    return any(
        h.field == key and h.direction == direction and i.now < h.until for h in i.state.holds
    )


def compute_retune_move(i: Inputs) -> Verdict | None:
    """The best one-field move for the observed workload; None when the model cannot predict
    it, or predicts the configuration in force within the SLO although the figures are not (it
    does not reproduce the problem)."""
    load, target = observed_load(i), slo_target(i)
    if load is None or target is None:
        return None
    model = i.spec.model
    current_c = candidate_of(i.spec, i.state.overrides, i.pods)
    current = predict(current_c, model, target, load)
    if current is None or within(current, target):
        return None  # the model does not see the problem the figures show: it cannot fix it
    best = best_move(i, target, load, current)
    if best is None:
        return Verdict(current, None)
    key, value, predicted = best
    from_value = i.budget(key)
    assert from_value is not None
    ready, _source = ready_horizon(i)
    rate = load.rate or 0.0
    payback = i.settings.retune_payback.total_seconds()
    gain = (predicted.attainment - current.attainment) * rate * payback
    surge = i.spare_gpu is True
    cost = 0.0 if surge else _restart_cost(i, current_c, model, target, load, current, ready)
    capped = replicas_capped(i)
    move = RetuneMove(key, from_value, value, current, predicted, gain, cost, capped, surge)
    return Verdict(current, move)


def best_move(
    i: Inputs,
    target: Target,
    load: Workload,
    current: Predicted,
    keeps: Callable[[Candidate, Predicted], bool] = lambda _c, _p: True,
) -> tuple[BudgetKey, int, Predicted] | None:
    """The one-field move (of MOVABLE, within its allowed range, not held) the model predicts
    brings the most of `load`'s requests into the SLO on the fleet's pods, MIN_GAIN more than
    `current` (the budgets in force under `load`), and that `keeps` accepts; None when no value
    does. A move must not refuse more than the SLO's 503 budget (or than `current` does, when it
    is over it already): closing the entry valve turns latency misses into 503s, and the share
    of requests "in the SLO" can rise while a fifth of them are refused."""
    floor = current.attainment + MIN_GAIN
    refused = max(target.max_rejection, current.rejected_share)
    best: tuple[tuple[float, float], BudgetKey, int, Predicted] | None = None
    for key in MOVABLE:
        now_value = i.budget(key)
        window = allowed_range(i.spec, key, i.settings)
        if now_value is None or window is None:
            continue
        for value in values_around(now_value, *window):
            if held(i, key, "up" if value > now_value else "down"):
                continue
            c = candidate_of(i.spec, {**i.state.overrides, key: value}, i.pods)
            predicted = predict(c, i.spec.model, target, load)
            if predicted is None or predicted.attainment < floor:
                continue
            if predicted.rejected_share > refused or not keeps(c, predicted):
                continue
            score = (predicted.attainment, predicted.per_pod)
            if best is None or score > best[0]:
                best = (score, key, value, predicted)
    return None if best is None else best[1:]


def _restart_cost(
    i: Inputs,
    c: Candidate,
    model: str,
    target: Target,
    load: Workload,
    current: Predicted,
    ready: float,
) -> float:
    """Requests a rolling restart without a free GPU takes out of the SLO: pod by pod, the
    others carry the whole load for a ready time each, at the attainment the model predicts for
    one pod fewer (none for a single pod). With a free GPU the rollout surges (a new pod is
    ready before an old one stops) and the cost is nil (compute_retune_move)."""
    rate = load.rate or 0.0
    fewer = None if c.replicas <= 1 else predict(replace(c, replicas=c.replicas - 1), model,
                                                  target, load)  # fmt: skip
    during = 0.0 if fewer is None else fewer.attainment
    return max(0.0, current.attainment - during) * rate * ready * c.replicas


def _diagnosis(i: Inputs, capped: str | None) -> str:
    out = (
        f"{signals.rejection_phrase(i)}, {signals.latency_phrase(i, 'ttft')}, "
        f"{signals.latency_phrase(i, 'itl')}"
    )
    return out if capped is None else f"{out}, {capped}"


def decide_retune(i: Inputs) -> tuple[Inputs, Decision | None]:
    """The model's move as this pass's decision when it pays. Otherwise None, and while replicas
    can still be added, `i` blocks every x2 budget remedy of the rules (RetuneDoesNotPay): the
    replica lever, fast and free of restarts, does the work, and where it is capped nothing
    pays (module doc). Where the model cannot predict (a figure missing, a GPU or model the
    catalog lacks) the rules' own steps remain the last lever, judged by rule 1 or a canary."""
    if not i.autotune_acts or not i.rates_trusted or not has_problem(i):
        return i, None
    if i.state.pending is not None or i.state.canary is not None:
        return i, None
    if retune_blocker(i) is not None:
        return i, None  # the rules' budget remedies name the same blocker
    waiting = window_wait(i) if model_knows(i) else None
    if waiting is not None:  # the window still mixes in the load before the problem
        return replace(i, budget_blocker=waiting), None
    verdict = compute_retune_move(i)
    if verdict is None:
        return i, None
    move = verdict.move
    if move is None or not move.pays:
        # would a surge pay for it? the handler looks for a free GPU and decides again
        i = replace(i, asks_spare_gpu=move is not None and i.spare_gpu is None and move.gain > 0)
        if replicas_capped(i) is not None and canary_on(i.spec):
            return i, None  # a step on a canary risks one pod (module doc)
        if move is None:
            why = (
                "the engine model finds no budget that does better than those in force "
                f"({verdict.current.phrase()})"
            )
        else:
            why = f"the model's best move does not pay ({move.phrase()})"
        return replace(i, budget_blocker=Blocked(Reason.RETUNE_DOES_NOT_PAY, why)), None
    no_room = None if move.surge else rollout_blocker(i)
    if no_room is not None:  # pays by the sums, but its restarts would stop pods the load needs
        return replace(i, budget_blocker=no_room, asks_spare_gpu=no_room.asks_spare_gpu), None
    applied = apply_budget(i, move.field, move.from_value, move.to_value)
    step = Move(applied.action, applied.state, f"{applied.phrase} in one move ({move.effect()})")
    return i, act(Reason.RETUNE_BY_MODEL, _diagnosis(i, move.capped), step, i.snapshot)
