"""Rules 2-10: the diagnosis, one layer per decision (docs/tuning.md has the table and the why).

Each rule returns None when its diagnosis does not apply. A *problem* rule that applies owns the
pass: it acts through its first workable remedy or holds and says why (never falls through to a
rule that could make the problem worse, e.g. a scale down during rejections). An *opportunity*
rule (5, 8) lets the chain go on when it cannot act.
"""

from __future__ import annotations

from vllm_operator.tuning import signals
from vllm_operator.tuning.capacity import trusted_capacity
from vllm_operator.tuning.forecast import forecast, forecast_phrase, rising, under_phrase
from vllm_operator.tuning.inputs import Inputs
from vllm_operator.tuning.limits import budget_move
from vllm_operator.tuning.model import BudgetKey, Decision
from vllm_operator.tuning.outcome import Blocked, Move, Remedy, hold, hold_for, remedy_decision
from vllm_operator.tuning.reasons import Reason
from vllm_operator.tuning.scaling import (
    forecast_pods,
    low_load,
    near_capacity,
    new_pods_suffice,
    pods_for,
    scale_down,
    scale_up,
    scale_up_to,
)
from vllm_operator.tuning.signals import Latency


def _latency_factor(i: Inputs, value: float | None, target: float | None) -> float:
    """Factor taking ITL from value to headroom x target, if ITL ~ decode batch (step caps it)."""
    if value is None or target is None or value <= 0:
        return i.settings.max_budget_step
    return i.settings.headroom * target / value


def _problem(i: Inputs, reasons: list[Reason], diagnosis: str, remedies: list[Remedy]) -> Decision:
    out = remedy_decision(reasons, diagnosis, remedies, i.snapshot)
    return hold_for(out, diagnosis, i.snapshot, i.state)


def rejections_without_headroom(i: Inputs) -> Decision | None:
    """2. Too many 503s and TTFT near or over its SLO: a longer queue would only add latency."""
    if not signals.rejections_over(i) or signals.headroom(i, "ttft"):
        return None
    diagnosis = f"{signals.rejection_phrase(i)} with {signals.latency_phrase(i, 'ttft')}"
    return _problem(i, [Reason.SCALE_UP_REJECTIONS], diagnosis, [lambda: scale_up(i)])


def _valve(i: Inputs) -> BudgetKey:
    """The entry valve that refuses: by reason label when known, else the one that is set."""
    by_reason = i.snapshot.rejection_rate_by_reason
    tokens = by_reason.get("max_num_queued_tokens", 0.0)
    requests = by_reason.get("max_num_queued_reqs", 0.0)
    if tokens or requests:
        return "maxPrefillTokens" if tokens > requests else "maxRequests"
    if i.budget("maxRequests") is None and i.budget("maxPrefillTokens") is not None:
        return "maxPrefillTokens"
    return "maxRequests"


def rejections_with_headroom(i: Inputs) -> Decision | None:
    """3. Too many 503s while TTFT has headroom: open the valve if KV can hold more, else scale."""
    if not signals.rejections_over(i):
        return None
    diagnosis = (
        f"{signals.rejection_phrase(i)} with {signals.latency_phrase(i, 'ttft')} "
        f"and {signals.kv_phrase(i)}"
    )

    def open_valve() -> Move | Blocked:
        if not signals.kv_headroom(i):
            return Blocked(
                Reason.KV_CACHE_FULL, f"{signals.kv_phrase(i)} leaves no room to queue more"
            )
        return budget_move(i, _valve(i), "up", i.settings.max_budget_step)

    reasons = [Reason.RAISE_QUEUE_REJECTIONS, Reason.SCALE_UP_REJECTIONS]
    return _problem(i, reasons, diagnosis, [open_valve, lambda: scale_up(i)])


def running_too_big(i: Inputs) -> Decision | None:
    """4. ITL over SLO or preemptions, with the active cap binding: shrink the decode batch."""
    itl_over, preempting = signals.over(i, "itl"), signals.preempting(i)
    if not (itl_over or preempting):
        return None
    factor = i.settings.headroom  # preemptions: aim at 80% of the cap
    if itl_over:
        factor = min(factor, _latency_factor(i, i.snapshot.itl_p95, i.targets.itl))
    # the move itself is limited to one step (/2): judge the cap that would really be set
    step = max(factor, 1.0 / i.settings.max_budget_step)
    if i.active_cap is not None and not signals.cap_would_bind(i, step):
        return None  # the lowered cap would still sit above the batch: no effect (rule 7 may scale)
    rate = i.snapshot.preemption_rate or 0.0
    cause = signals.latency_phrase(i, "itl") if itl_over else f"{rate:.3g} preemptions/s"
    diagnosis = f"{cause} with {signals.running_phrase(i)}"
    reason = Reason.LOWER_ACTIVE_SEQS_ITL if itl_over else Reason.LOWER_ACTIVE_SEQS_PREEMPTION
    lower = lambda: budget_move(i, "maxActiveSeqs", "down", factor)  # noqa: E731
    return _problem(i, [reason, Reason.SCALE_UP_LATENCY], diagnosis, [lower, lambda: scale_up(i)])


def waiting_at_cap(i: Inputs) -> Decision | None:
    """5. ITL well under SLO while requests wait at the active cap and KV has room: raise the cap.

    The step aims ITL at headroom x SLO, so rule 4 (over SLO) does not fire right after.
    """
    ok = signals.well_under(i, "itl") and signals.requests_wait(i)
    if not (ok and signals.at_active_cap(i) and signals.kv_headroom(i)):
        return None
    factor = _latency_factor(i, i.snapshot.itl_p95, i.targets.itl)
    diagnosis = f"{signals.latency_phrase(i, 'itl')} with {signals.running_phrase(i)}"
    raise_cap = lambda: budget_move(i, "maxActiveSeqs", "up", factor)  # noqa: E731
    out = remedy_decision([Reason.RAISE_ACTIVE_SEQS_WAITING], diagnosis, [raise_cap], i.snapshot)
    return out if isinstance(out, Decision) else None


def prefill_bound(i: Inputs) -> Decision | None:
    """6. TTFT over SLO spent in prefill of long prompts, ITL quiet: raise the step token budget.

    Prefill-bound: queue time p95 below prefill_queue_share of TTFT p95 (the time goes after
    admission) and prompts of at least long_prompt_fraction of the token budget.
    """
    snap, target = i.snapshot, i.targets.ttft
    itl_quiet = i.targets.itl is None or signals.well_under(i, "itl")
    if not (signals.over(i, "ttft") and itl_quiet) or snap.ttft_p95 is None or target is None:
        return None
    queue = snap.queue_time_p95
    if queue is None or queue >= i.settings.prefill_queue_share * snap.ttft_p95:
        return None
    budget, prompt = i.budget("maxBatchedTokens"), snap.prompt_tokens_per_request
    if budget is not None and (prompt is None or prompt < i.settings.long_prompt_fraction * budget):
        return None
    prompt_text = "?" if prompt is None else f"{prompt:.0f}"
    diagnosis = (
        f"{signals.latency_phrase(i, 'ttft')} with queue time p95 {signals.fmt_s(queue)} "
        f"and {prompt_text} prompt tokens per request"
    )
    # Prefill time ~ 1 / token budget: aim TTFT at headroom x SLO.
    factor = snap.ttft_p95 / (i.settings.headroom * target)
    raise_budget = lambda: budget_move(i, "maxBatchedTokens", "up", factor)  # noqa: E731
    reasons = [Reason.RAISE_BATCHED_TOKENS_TTFT, Reason.SCALE_UP_LATENCY]
    return _problem(i, reasons, diagnosis, [raise_budget, lambda: scale_up(i)])


def latency_over(i: Inputs) -> Decision | None:
    """7. TTFT or ITL over SLO and no budget rule above fits: add replicas."""
    both: tuple[Latency, ...] = ("ttft", "itl")
    over = [w for w in both if signals.over(i, w)]
    if not over:
        return None
    phrases = " and ".join(signals.latency_phrase(i, w) for w in over)
    diagnosis = f"{phrases} with {signals.running_phrase(i)}"
    held = new_pods_suffice(i)
    up = (lambda: held) if held is not None else (lambda: scale_up(i))
    return _problem(i, [Reason.SCALE_UP_LATENCY], diagnosis, [up])


def forecast_over(i: Inputs) -> Decision | None:
    """8. Arrivals forecast one pod ready time ahead need more pods than asked for: add them.

    Pods asked for and still loading count as coming (decide.py runs this rule while they
    load). With the trend flat the forecast is the present, which rule 8b judges (it also asks
    that latency is no longer quiet, so a capacity learned on a heavier mix adds nothing).
    """
    known, ahead = trusted_capacity(i), forecast(i)
    if known is None or ahead is None or not rising(ahead) or not i.rates_trusted:
        return None
    per_pod = i.settings.forecast_headroom * known.per_pod
    need = forecast_pods(i, ahead.rate, known.per_pod)
    if need <= i.replicas:
        return None
    diagnosis = (
        f"{forecast_phrase(ahead)} needs {need} replicas at {per_pod:.2f}/s each "
        f"({i.settings.forecast_headroom:.0%} of capacity {known.per_pod:.2f}/s, {known.source})"
    )
    up = lambda: scale_up_to(i, need)  # noqa: E731
    out = remedy_decision([Reason.SCALE_UP_FORECAST], diagnosis, [up], i.snapshot)
    return out if isinstance(out, Decision) else None


def capacity_near(i: Inputs) -> Decision | None:
    """8b. Arrivals near the capacity a pod was seen to have, latency rising: add pods ahead.

    A scale-up that waits for the SLO to be missed leaves it missed while the new pod loads
    (minutes). It adds what the trusted capacity says the present arrivals need to sit under
    `headroom` x it on every pod (at least one pod), not a fixed step: the capacity is known,
    and a growing load is rule 8's to forecast. Like an opportunity rule it lets the chain go on
    when it cannot act: low load cannot hold at the same time (it needs quiet figures), so
    nothing below can scale down.
    """
    known, rate = trusted_capacity(i), i.snapshot.request_rate
    if not near_capacity(i) or known is None or rate is None:
        return None
    diagnosis = (
        f"{signals.capacity_phrase(i)} with {signals.latency_phrase(i, 'ttft')} "
        f"and {signals.latency_phrase(i, 'itl')}"
    )
    up = lambda: scale_up_to(i, pods_for(i, rate, known.per_pod))  # noqa: E731
    out = remedy_decision([Reason.SCALE_UP_NEAR_CAPACITY], diagnosis, [up], i.snapshot)
    return out if isinstance(out, Decision) else None


def low_load_rule(i: Inputs) -> Decision | None:
    """9. Sustained low load: scale down one step (votes and stabilisation in scaling.py)."""
    if not low_load(i):
        return None
    diagnosis = (
        f"low load: {signals.running_phrase(i)}, {signals.rejection_phrase(i)}{under_phrase(i)}"
    )
    out = remedy_decision(
        [Reason.SCALE_DOWN_LOW_LOAD], diagnosis, [lambda: scale_down(i)], i.snapshot
    )
    if isinstance(out, Blocked) and out.reason == Reason.AT_MIN_REPLICAS:
        return None  # nothing to do: WithinSLO says so
    return hold_for(out, diagnosis, i.snapshot, i.state)


def within_slo(i: Inputs) -> Decision:
    """10. Nothing to do."""
    message = (
        f"{signals.rejection_phrase(i)}, {signals.latency_phrase(i, 'ttft')}, "
        f"{signals.latency_phrase(i, 'itl')}, {signals.running_phrase(i)}"
    )
    if trusted_capacity(i) is not None:
        message = f"{message}, {signals.capacity_phrase(i)}"
    return hold(Reason.WITHIN_SLO, message, i.snapshot, i.state)
