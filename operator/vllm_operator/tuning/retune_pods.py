"""Rule 9b: a budget move that lets fewer pods carry the load, made when it pays in GPU time.

Budgets copied from a blog post (a queue of 32, 8 active sequences on an H100) do not show as a
problem: the replica lever keeps the SLO by running two or three times the pods the GPU needs.
Rule 1b (retune_move.py) moves budgets only for a problem, so nothing else would ever correct
them. This rule runs when no problem rule and no scale-down owns the pass: the fleet is as small
as the budgets in force allow it to be, and the SLO is met.

The engine model (the planner's evaluation, as rule 1b uses it) replays the observed workload at
`1 / forecast_headroom` of the rate a scale-down must fit (the long window's peak, the present
and the forecast, forecast.under_rate; the margin the tuner sizes replicas with, rounded up to a
9% step). The pods the budgets in force need are the replica lever's own: what rule 9 sizes the
fleet to with its trusted capacity (tuning/capacity.py), at most the fleet, since those are the
pods a move can save (the lever's capacity is more cautious than a replay's, and counting in
the replay's pods found no pod to save where the lever kept two more: h100-8b-blog/conv, seed
8); with no capacity to size with, the fewest pods the replay sees the SLO met on. Then each
one-field move of rule 1b's grid (never maxSeqs, within autotune.bounds and vLLM's cross-field
rules) is replayed on fewer pods. A move must keep the p95s within the SLO and as many requests
in it as the budgets in force on their pods (less MIN_GAIN): a p95 just under the SLO can hide
a third of the requests missing their own. And it must raise what one pod serves within the
SLO (the model's capacity for the workload's mix) by `fewer_pods_min_gain` (x1.25): a replay
that finds fewer pods at an unchanged capacity found the noise of a short replay at the SLO's
edge (a valve that caps every pod alike), and a small gain saves a pod only at the load of the
moment (a 9% gain saves one of six pods at one load, none at the next). The pods it leaves
are the most of what the replay needs and what the lever will keep, its capacity raised by the
same ratio (without one: the pods that together serve what the pods now serve), so fewer pods
at today's load never mean more at the peak (a smaller token budget can fit a trough on one
pod and need twice the pods at noon). The move that leaves the fewest pods (then the most
requests in the SLO, then the most served per pod) is the target, in one move. Nor is a move
made while the forecast rises: a rolling fleet holds (rule 0d), so the replica lever would be
out of reach while the load climbs (a fleet at its floor is looked at then, for the bet below
that its pods carry through the hold).

It pays when the pods it saves over `fewer_pods_payback` (2 h: budgets that fit the workload's
mix keep paying at every load level, so the horizon is longer than rule 1b's, a problem's),
counted from the end of the rollout (a ready time for each wave of surge pods: as many at once
as the free GPUs place, render/rollout.py) and of its judgement, outweigh the GPU time the
rollout spends: every pod is replaced once, and each
replacement holds a GPU that serves nothing for the pods' ready time (the surge pod while it
loads, or the restarted pod itself); and the pods a fleet runs above what its budgets need are
kept until the rollout is over (a rolling fleet holds, rule 0d), where rule 9 would shed them.
A move for GPU hours never trades serving capacity for them: it is made only where a GPU of the
type is free, so its rollout surges (a new pod is ready before an old one stops) and no window
runs short of a pod; without one the fleet keeps its budgets. It also spends one of the hour's
restarts (autotune.maxRestartsPerHour) that a problem may then lack; the replica lever stays.
The pods themselves are saved by rule 9 once the change is judged (rule 1) and the model's
capacity for the new budgets says the load fits on fewer.

No pod to save: what every pod serves. At the floor (the budgets in force need no more than
minReplicas) no pod can be saved; above it, no move may keep as many requests in the SLO on
fewer pods (a valve that caps each pod far below the model's best still needs the pods it has
at the load of the moment). The spec's budgets may still be far from the model's best for the
workload, and the look then keeps the pods where they are and judges a move by what every pod
serves: the move that raises it most, by floor_min_gain (x1.06) at least at the floor and by
fewer_pods_min_gain (x1.25) above it (x1.08-1.21 there cost 4-9% more GPU-hours on 8 L4s for
no window, bench l4-3b/multiday and l4-3b/bursty), and above it not while the arrivals fall
(rule 9 sheds those pods, and a rollout would hold them). Keeping the SLO and as many requests
in it on those pods, it pays when the pod-time it would save where the load fills the pods
(the pods x (1 - before/after) over the payback) outweighs the rollout's (reason
RetuneForCapacity). That saving comes only if the load grows. Where the replica lever cannot
carry the growth (it reaches at most LEVER_ROOM x the pods the budgets need: maxReplicas, or the
fleet and the pods the free GPUs of the type place beside it), the bet is made where the load
does not climb, which on a morning is the first measured pass. There the
pods the lever has are the capacity the service has, and now, while a GPU is free, is the one
time a move costs no pod: on l4-3b-gpus2/diurnal (two L4s in the cluster, a peak that needs
three) the single pod of the morning rolls onto the second GPU with maxBatchedTokens 2048 ->
256, and the two pods of the peak meet the ITL SLO with it; at the peak the same move would stop
one of the two (rollout_room.py). On l4-3b-valve8-gpus4/diurnal (a valve of 8 per pod, four L4s)
the morning's two pods need each other at the valve, and with a valve of 32 one pod serves x2.7:
moved then, while two GPUs are free, the peak fits on the four GPUs; without the move the
replica lever asks for a fifth pod that stays Pending and the valve refuses 2% of the peak.
Where the lever has room, the bet is made only at the fleet's floor, where the passes tell the
trend (forecast.trend_known) and the pods in force carry it until the rollout is judged
(carried_through_hold): a rolling fleet holds the lever (rule 0d), so the growth of that time is
theirs alone. Made at the first measured pass, one sample that cannot tell a climb, it put
l4-3b/multiday's single pod alone on a steep morning (1.5-1.9% 503s in three seeds of five); made
where the pod carries the trend, on the diurnal mornings of 8 L4s, maxBatchedTokens 2048 -> 256
took 5-7% fewer GPU-hours and 1.6-2.4 more points of windows (docs/benchmarks.md, "A bet at the
floor the pod carries").

What one pod serves is a search of about a dozen replays, and a look weighs a few dozen moves:
each move is first replayed once at the bar (one pod at what it serves now x the gain asked),
and only those that meet it are searched. A look still costs replays (bench/results/
capacity_pass.md), so a service is looked at once per `fewer_pods_recheck`
(status.tuning.fewerPodsLookedAt), not on every pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

from vllm_operator.api.budgets import budget_change
from vllm_operator.planning.candidate import Candidate, Target
from vllm_operator.planning.workload import Workload
from vllm_operator.tuning.capacity import trusted_capacity
from vllm_operator.tuning.forecast import (
    extrapolate,
    falling_share,
    forecast,
    ready_horizon,
    rising,
    trend_known,
    under_rate,
)
from vllm_operator.tuning.inputs import Inputs
from vllm_operator.tuning.limits import allowed_range, apply_budget, retune_blocker
from vllm_operator.tuning.model import BudgetKey, Decision, Forecast
from vllm_operator.tuning.model_capacity import largest_rate
from vllm_operator.tuning.outcome import Move, act
from vllm_operator.tuning.problem_wait import has_problem
from vllm_operator.tuning.reasons import Reason
from vllm_operator.tuning.retune_move import (
    MIN_GAIN,
    MOVABLE,
    Predicted,
    candidate_of,
    held,
    model_knows,
    observed_load,
    predict,
    predict_within,
    slo_target,
    values_around,
    within,
)
from vllm_operator.tuning.scaling import pods_for

RATE_STEPS_PER_OCTAVE = 8  # the sized rate is rounded up to a 2^(1/8) = 9% step
# With no pod to save a move is made only where the replica lever reaches at most this many
# times the pods the budgets need: beyond, the pods it adds carry the load's growth (module doc,
# "No pod to save").
LEVER_ROOM = 2


@dataclass(frozen=True)
class FewerPods:
    """The model's best move for fewer pods, and its sums in pod-seconds."""

    field: BudgetKey
    from_value: int
    to_value: int
    pods_now: int  # the pods the budgets in force need (at most the fleet)
    pods_after: int
    predicted: Predicted  # the target on pods_after, at the sized load
    per_pod_now: float  # what one pod serves within the SLO (req/s), budgets in force
    per_pod_after: float  # ... and with the move
    saved: float  # pod-seconds over the payback
    spent: float  # pod-seconds of GPU the rollout holds without serving
    delay: float  # seconds until a pod can be saved: the rollout, then the judgement
    # no pod to save (at minReplicas, or none on fewer pods): the gain is what every pod serves
    by_capacity: bool = False
    at_floor: bool = False  # the budgets in force need no more than minReplicas

    @property
    def pays(self) -> bool:
        return (self.by_capacity or self.pods_after < self.pods_now) and self.saved > self.spent

    def phrase(self) -> str:
        move = f"{budget_change(self.field, self.from_value, self.to_value)}: the engine model"
        sums = (
            f"after {self.delay:.0f}s of rollout and judgement, against {self.spent:.0f} spent in "
            "the rollout (it surges on a free GPU)"
        )
        if self.by_capacity:
            return (
                f"{move} predicts one pod serves {self.per_pod_after:.2f}/s within the SLO "
                f"against {self.per_pod_now:.2f}/s with the budgets in force, the SLO kept on "
                f"{self.pods_now} ({self.predicted.phrase()}); every pod the replica lever runs "
                f"serves x{self.per_pod_after / self.per_pod_now:.2f}: {self.saved:.0f} "
                f"pod-seconds over the payback where the load fills them, {sums}"
            )
        return (
            f"{move} predicts {self.pods_after} pods within the SLO ({self.predicted.phrase()}) "
            f"against {self.pods_now} with the budgets in force (one pod serves "
            f"{self.per_pod_after:.2f}/s against {self.per_pod_now:.2f}/s); "
            f"{self.saved:.0f} pod-seconds saved over the payback {sums}"
        )


def sized_load(load: Workload, i: Inputs, fit: float | None) -> Workload:
    """The load the tuner sizes replicas for: the rate a scale-down must fit (`fit`, else the
    observed) over the forecast headroom, rounded up to a RATE_STEPS_PER_OCTAVE step, so that
    passes whose rates differ by a few percent replay the same load (predict() memoises on it)
    and the sizing errs high."""
    rate = max(load.rate or 0.0, fit or 0.0) / i.settings.forecast_headroom
    step = math.ceil(math.log2(max(rate, 1e-3)) * RATE_STEPS_PER_OCTAVE - 1e-9)
    return replace(load, rate=round(2 ** (step / RATE_STEPS_PER_OCTAVE), 3))


def fewest_pods(
    c: Candidate, model: str, target: Target, load: Workload, lo: int, floor: float = 0.0
) -> tuple[int, Predicted] | None:
    """The fewest pods in [lo, c.replicas] the model predicts within the SLO for `load` with at
    least `floor` of the requests in it, scanning down from c.replicas, and that prediction;
    None when not even c.replicas does (or the model refuses the configuration)."""
    best = None
    for n in range(c.replicas, lo - 1, -1):
        p = predict(replace(c, replicas=n), model, target, load)
        if p is None or not within(p, target) or p.attainment < floor:
            break
        best = (n, p)
    return best


def serves(c: Candidate, model: str, target: Target, load: Workload, rate: float) -> bool:
    """Whether one pod of `c` serves `load`'s mix at `rate` (req/s) within the SLO, by the
    model."""
    return predict_within(replace(c, replicas=1), model, target, replace(load, rate=round(rate, 4)))


def pod_capacity(c: Candidate, model: str, target: Target, load: Workload) -> float:
    """What one pod of `c` serves within the SLO for `load`'s mix (req/s), by the model."""
    return largest_rate(lambda rate: serves(c, model, target, load, rate))


@dataclass(frozen=True)
class _Look:
    """What one look weighs the moves against."""

    i: Inputs
    target: Target
    load: Workload  # the sized load the replays run (sized_load)
    fit: float | None  # the rate a scale-down must fit (forecast.under_rate)
    trusted: float | None  # the capacity per pod the replica lever sizes with (capacity.py)
    lo: int  # the fewest pods allowed (minReplicas, at least 1)
    pods_now: int  # the pods the budgets in force need, at most the fleet
    floor: float  # the share of requests in the SLO a move must keep (on pods_now, less MIN_GAIN)
    # no pod can be saved: the pods stay and a move is judged by what every pod serves (the
    # module doc's "No pod to save"); at minReplicas always, above it when a look for fewer
    # pods found no move
    by_capacity: bool = False

    @property
    def at_floor(self) -> bool:
        """The budgets in force need no more pods than minReplicas."""
        return self.pods_now <= self.lo

    @cached_property
    def per_pod_now(self) -> float:
        c = candidate_of(self.i.spec, self.i.state.overrides, 1)
        return pod_capacity(c, self.i.spec.model, self.target, self.load)

    def lever_after(self, per_pod_after: float) -> int:
        """The pods the replica lever keeps after a move that raises what one pod serves from
        per_pod_now to `per_pod_after`: its own sizing with the trusted capacity raised as much;
        without one, the pods that serve together what pods_now serve now."""
        ratio = per_pod_after / self.per_pod_now
        if self.trusted is None or self.fit is None:
            return max(self.lo, math.ceil(self.pods_now / ratio - 1e-9))
        return max(self.lo, pods_for(self.i, self.fit, self.trusted * ratio))

    def try_move(self, key: BudgetKey, value: int) -> tuple[int, Predicted, float] | None:
        """(pods after, the prediction there, what one pod serves) for one move, or None when
        the lever would keep no fewer pods with it."""
        i, model = self.i, self.i.spec.model
        overrides = {**i.state.overrides, key: value}
        # judged by capacity the move keeps the SLO on the pods now; otherwise on fewer
        c = candidate_of(i.spec, overrides, self.pods_now - (0 if self.by_capacity else 1))
        # at the floor any clear gain (x1.06); above it the bar of a move for fewer pods (x1.25):
        # a pod on 8 L4s that serves x1.08-1.21 cost +4-9% GPU-hours (l4-3b/multiday, bursty)
        gain = i.settings.floor_min_gain if self.at_floor else i.settings.fewer_pods_min_gain
        bar = self.per_pod_now * gain
        # one replay at the bar first: most moves miss it, and what one pod serves is a search
        # of a dozen replays (docs/tuning.md, "What a look costs")
        if self.per_pod_now <= 0 or not serves(c, model, self.target, self.load, bar):
            # one pod serves no more (fewer pods would be a replay's noise: a valve that caps
            # every pod alike), or too little more for the pods saved to outlast today's load
            return None
        lo = self.pods_now if self.by_capacity else self.lo
        fewer = fewest_pods(c, model, self.target, self.load, lo, self.floor)
        if fewer is None:
            return None
        per_pod = pod_capacity(c, model, self.target, self.load)
        if per_pod < bar:  # the search's grid fell short of the bar the one replay met
            return None
        # fewer pods for the same load means each serves more (a smaller token budget can fit
        # a trough on one pod and need twice the pods at noon); the lever keeps what its own
        # sizing says, and the replay has seen the SLO kept on every count down to fewer[0]
        n = max(fewer[0], self.lever_after(per_pod))
        if n >= self.pods_now and not self.by_capacity:
            return None
        p = predict(replace(c, replicas=n), model, self.target, self.load)
        assert p is not None  # fewest_pods replayed it
        return n, p, per_pod


def _look(i: Inputs) -> _Look | None:
    base, target, scaling = observed_load(i), slo_target(i), i.scaling
    if base is None or target is None or scaling is None:
        return None
    fit = under_rate(i, forecast(i))
    load, model, lo = sized_load(base, i, fit), i.spec.model, max(1, scaling.min_replicas)
    known = trusted_capacity(i)
    trusted = known.per_pod if known is not None and known.per_pod > 0 else None
    if trusted is not None and fit is not None:
        # rule 9 sheds the pods above what its sizing keeps: a move saves only below them
        pods_now = min(i.replicas, pods_for(i, fit, trusted))
        now_p = predict(candidate_of(i.spec, i.state.overrides, pods_now), model, target, load)
        if now_p is None or not within(now_p, target):
            return None  # the model does not see the SLO met: it cannot size a move
    else:  # no capacity to size with: the fewest pods the replay sees the SLO met on
        found = fewest_pods(candidate_of(i.spec, i.state.overrides, i.replicas), model, target,
                            load, lo)  # fmt: skip
        if found is None:
            return None
        pods_now, now_p = found
    # the p95s within the SLO are not enough: as many requests must meet it as on pods_now
    floor = now_p.attainment - MIN_GAIN
    look = _Look(i, target, load, fit, trusted, lo, pods_now, floor)
    return replace(look, by_capacity=look.at_floor)


def compute_fewer_pods(i: Inputs) -> FewerPods | None:
    """The model's one-field move after which the replica lever keeps the fewest pods; with no
    pod to save, on a replica lever that cannot grow past LEVER_ROOM x the pods the budgets
    need, the move that raises what every pod serves most (the module doc's "No pod to save").
    None when there is neither (or the model cannot tell)."""
    look = _look(i)
    if look is None:
        return None
    move = _best_move(look)
    # above the floor, a load that falls is shed by rule 9, which a rollout would hold (rule
    # 0d): the pods a bet raises would be those going (l4-3b-valve8/diurnal, 8 L4s, at minute
    # 49: +0.5 GPU-hours for no window)
    if (
        move is None
        and not look.by_capacity
        and falling_share(i) is None
        and _lever_capped(i, look.pods_now)
    ):
        move = _best_move(replace(look, by_capacity=True))
    return move


def _lever_capped(i: Inputs, pods: int) -> bool:
    """The replica lever reaches at most LEVER_ROOM x `pods`, or may: before the look for free
    GPUs its reach is unknown, and decide_fewer_pods checks it once known."""
    reach = _lever_reach(i)
    return reach is None or reach[0] <= LEVER_ROOM * pods


def _best_move(look: _Look) -> FewerPods | None:
    i = look.i
    best: tuple[tuple[int, float, float], BudgetKey, int, Predicted, float] | None = None
    for key in MOVABLE:
        now_value, window = i.budget(key), allowed_range(i.spec, key, i.settings)
        if now_value is None or window is None:
            continue
        for value in values_around(now_value, *window):
            if held(i, key, "up" if value > now_value else "down"):
                continue
            found = look.try_move(key, value)
            if found is None:
                continue
            n, p, per_pod = found
            # judged by capacity the pods are fixed: the most served per pod is the target
            score = (
                (-n, per_pod, p.attainment) if look.by_capacity else (-n, p.attainment, p.per_pod)
            )
            if best is None or score > best[0]:
                best = (score, key, value, p, per_pod)
    if best is None:
        return None
    (neg_n, _, _), key, value, predicted, per_pod = best
    from_value = i.budget(key)
    assert from_value is not None
    return _priced(look, key, (from_value, value), -neg_n, predicted, per_pod)


def _priced(look: _Look, key: BudgetKey, values: tuple[int, int], pods_after: int,
            predicted: Predicted, per_pod_after: float) -> FewerPods:  # fmt: skip
    """The move with its sums: the pod-seconds it saves over the payback, and those its
    rollout spends (see the module doc)."""
    i, pods_now = look.i, look.pods_now
    ready, _source = ready_horizon(i)
    # the surge replaces as many pods per ready time as the free GPUs place (all of them when
    # the look for free GPUs is still to come: the second look decides), then the change is
    # judged: no pod is saved before that
    waves = i.surge_waves if i.spare_pods is not None else 1
    judged = max(i.settings.rollback_evaluation_delay.total_seconds(), i.snapshot.window_seconds)
    delay = waves * ready + judged
    horizon = max(0.0, i.settings.fewer_pods_payback.total_seconds() - delay)
    # every replacement loads for a ready time; and a fleet above what its budgets need keeps
    # those pods until the rollout is over (rule 0d holds a rolling fleet), where rule 9 would
    # have shed them
    spent = i.replicas * ready + (i.replicas - pods_now) * delay
    if look.by_capacity:  # the pod-time the raised capacity saves where the load fills the pods
        saved = pods_now * (1 - look.per_pod_now / per_pod_after) * horizon
    else:
        saved = (pods_now - pods_after) * horizon
    return FewerPods(
        key, *values, pods_now, pods_after, predicted, look.per_pod_now, per_pod_after, saved,
        spent, delay, look.by_capacity, look.at_floor,
    )  # fmt: skip


def decide_fewer_pods(i: Inputs) -> tuple[Inputs, Decision | None]:
    """9b. The fleet meets its SLO, and the model's best move needs fewer pods (or, with no pod
    to save on a capped replica lever, serves more per pod): the move when it pays (see the
    module doc), else None. A move whose rollout needs a free GPU, in a pass that
    has not looked for one, returns `i` asking for it (Inputs.asks_spare_gpu): the handler looks
    and decides again."""
    if not i.autotune_acts or not i.rates_trusted or has_problem(i) or i.scaling is None:
        return i, None
    if i.state.pending is not None or i.state.canary is not None or retune_blocker(i) is not None:
        return i, None
    if not model_knows(i):
        return i, None
    ahead = forecast(i)
    if _holds_off(i, ahead):
        return i, None
    looked = i.state.fewer_pods_looked_at
    if looked is not None and i.now - looked < i.settings.fewer_pods_recheck:
        return i, None
    if not i.may_look:  # due, but the operator's look budget is spent: a later pass
        return replace(i, asks_look=True), None
    # before the passes tell the trend a look is not recorded, so the next pass looks again: a
    # lever with room bets only on a told trend (_bet_reach), and a replay of a service's first
    # minutes can miss the move the next pass finds (bench l4-3b-seqs256/diurnal seed 10)
    told = ahead is None or _trend_told(i, ahead)
    seen = replace(i, state=replace(i.state, fewer_pods_looked_at=i.now))
    kept = seen if told else i  # the pass to return when no move is made
    i = seen
    move = compute_fewer_pods(i)
    if move is None or not move.pays:
        return kept, None
    if i.spare_gpu is not True:  # its rollout must surge (module doc)
        return replace(i, asks_spare_gpu=i.spare_gpu is None), None
    diagnosis, reason = f"the SLO is met on {i.replicas} pods", Reason.RETUNE_FOR_FEWER_PODS
    if move.by_capacity:
        reach = _bet_reach(i, ahead, move)
        if reach is None:
            return kept, None
        reason = Reason.RETUNE_FOR_CAPACITY
        why = (
            "the fewest the budgets in force need (minReplicas)"
            if move.at_floor
            else "no move keeps as many requests in it on fewer"
        )
        diagnosis += f", {why}, and the replica lever reaches {reach[0]} ({reach[1]})"
    applied = apply_budget(i, move.field, move.from_value, move.to_value)
    step = Move(applied.action, applied.state, f"{applied.phrase} in one move ({move.phrase()})")
    return i, act(reason, diagnosis, step, i.snapshot)


def _fleet_at_floor(i: Inputs) -> bool:
    return i.scaling is not None and i.replicas <= max(1, i.scaling.min_replicas)


def _holds_off(i: Inputs, ahead: Forecast | None) -> bool:
    """No look now: the load climbs (a rolling fleet holds, rule 0d: the pods a move saves would
    be wanted back before it is judged), unless the fleet is at its floor and the passes tell the
    trend, which a bet the pod carries through the rollout may then be weighed against
    (_bet_reach)."""
    if ahead is None or not rising(ahead):
        return False
    return not (_fleet_at_floor(i) and _trend_told(i, ahead))


def _trend_told(i: Inputs, ahead: Forecast) -> bool:
    return ahead.past_period_rate is not None or trend_known(i)


def _bet_reach(i: Inputs, ahead: Forecast | None, move: FewerPods) -> tuple[int, str] | None:
    """The replica lever's reach (`_lever_reach`) where a bet on what a pod serves may be made;
    None where it may not. A capped lever (at most LEVER_ROOM x the pods the budgets need) gets
    it where the load does not climb. A lever with room gets it only at the fleet's floor, where
    the passes tell the trend and the pods carry it through the rollout's hold
    (carried_through_hold): a first pass cannot tell a steep morning from a flat one."""
    reach = _lever_reach(i)
    if reach is None:
        return None
    if reach[0] <= LEVER_ROOM * move.pods_now:
        return None if ahead is not None and rising(ahead) else reach
    if ahead is None or not (_trend_told(i, ahead) and _fleet_at_floor(i)):
        return None
    return reach if carried_through_hold(i, ahead, move) else None


def carried_through_hold(i: Inputs, ahead: Forecast, move: FewerPods) -> bool:
    """Whether the pods that run now, with the budgets in force, serve the arrivals the forecast
    expects when the move's rollout and judgement are over (`move.delay`): a rolling fleet holds
    the replica lever that long (rule 0d). The trend runs on past one ready time, without the
    forecast's cap for one; a period's shape, where known, is what comes next. A load that does
    not grow is carried: the SLO is met on it now (rule 9b runs only then)."""
    late = extrapolate(ahead.now_rate, ahead.slope, move.delay, i.snapshot.window_seconds)
    if ahead.past_period_rate is not None:
        late = max(late, ahead.rate)
    room = i.replicas * move.per_pod_now * i.settings.forecast_headroom
    return late <= max(ahead.now_rate, room)


def _lever_reach(i: Inputs) -> tuple[int, str] | None:
    """The most pods the replica lever can run now, and why: maxReplicas, or the fleet and the
    pods the free GPUs of the type place beside it; None before the look for free GPUs."""
    if i.spare_pods is None or i.scaling is None:
        return None
    placed = (i.replicas + i.spare_pods, f"{i.spare_pods} more pods on the free GPUs of the type")
    cap = i.scaling.max_replicas
    return placed if cap is None or placed[0] <= cap else (cap, "maxReplicas")
