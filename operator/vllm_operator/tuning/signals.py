"""What the figures say, as predicates the rules combine, and the phrases their messages quote.

Conventions (docs/tuning.md "Thresholds"): a latency *trigger* needs its SLO (no SLO, rule off);
a latency *headroom* condition holds when there is no SLO (nothing to protect). Latency figures
count only when enough requests arrived (`Inputs.rates_trusted`); an unmeasured figure is never
read as zero.
"""

from __future__ import annotations

import math
from typing import Literal

from vllm_operator.tuning.capacity import trusted_capacity
from vllm_operator.tuning.inputs import Inputs

Latency = Literal["ttft", "itl"]
_NAMES: dict[Latency, str] = {"ttft": "TTFT p95", "itl": "ITL p95"}


def fmt_s(seconds: float) -> str:
    return f"{seconds * 1000:.0f}ms" if seconds < 0.1 else f"{seconds:.2f}s"


def fmt_pct(ratio: float) -> str:
    return f"{ratio * 100:.1f}%"


def _latency(i: Inputs, which: Latency) -> tuple[float | None, float | None]:
    value = i.snapshot.ttft_p95 if which == "ttft" else i.snapshot.itl_p95
    target = i.targets.ttft if which == "ttft" else i.targets.itl
    return (value if i.rates_trusted else None), target


def over(i: Inputs, which: Latency) -> bool:
    value, target = _latency(i, which)
    return value is not None and target is not None and value > target


def headroom(i: Inputs, which: Latency) -> bool:
    """Room to trade latency for throughput: no SLO, or measured below headroom x SLO."""
    value, target = _latency(i, which)
    return target is None or (value is not None and value < i.settings.headroom * target)


def well_under(i: Inputs, which: Latency) -> bool:
    """A trigger: the SLO is set and the figure is at most well_under x SLO."""
    value, target = _latency(i, which)
    return value is not None and target is not None and value <= i.settings.well_under * target


def quiet(i: Inputs, which: Latency, share: float | None = None) -> bool:
    """For low load: nothing says this latency is busy (no SLO, no figure, or at most `share`
    x SLO, well_under by default)."""
    value, target = _latency(i, which)
    share = i.settings.well_under if share is None else share
    return value is None or target is None or value <= share * target


def itl_fits_after(i: Inputs, batch_factor: float) -> bool:
    """ITL keeps its headroom when each pod's decode batch grows by `batch_factor`.

    ITL is taken as proportional to the batch. The real curve has a floor (weights are read once a
    step whatever the batch), so this overestimates the rise: a scale down it allows is safe, and
    one it refuses is a step the fleet may well have afforded. A decode batch near the ITL SLO is
    often far below the active cap, so the cap alone would let a scale down land over the SLO.
    """
    value, target = _latency(i, "itl")
    if value is None or target is None:
        return True
    return value * batch_factor <= i.settings.headroom * target


def all_quiet(i: Inputs, share: float | None = None) -> bool:
    """503s quiet, and TTFT and ITL at most `share` x their SLOs (see quiet)."""
    return rejections_quiet(i) and quiet(i, "ttft", share) and quiet(i, "itl", share)


def latency_phrase(i: Inputs, which: Latency) -> str:
    value, target = _latency(i, which)
    name = _NAMES[which]
    if value is None:
        return f"{name} unmeasured"
    if target is None:
        return f"{name} {fmt_s(value)} (no SLO)"
    relation = (
        "over" if value > target else "near" if value >= i.settings.headroom * target else "under"
    )
    return f"{name} {fmt_s(value)} {relation} SLO {fmt_s(target)}"


def rejections_over(i: Inputs) -> bool:
    ratio = i.snapshot.rejection_ratio
    return i.rates_trusted and ratio is not None and ratio > i.targets.max_rejection_ratio


def rejections_quiet(i: Inputs) -> bool:
    ratio = i.snapshot.rejection_ratio
    budget = i.targets.max_rejection_ratio
    return not i.rates_trusted or ratio is None or ratio <= i.settings.well_under * budget


def rejection_phrase(i: Inputs) -> str:
    ratio = i.snapshot.rejection_ratio
    budget = fmt_pct(i.targets.max_rejection_ratio)
    if ratio is None:
        return f"503 ratio unmeasured (budget {budget})"
    relation = "over" if ratio > i.targets.max_rejection_ratio else "within"
    return f"503 ratio {fmt_pct(ratio)} {relation} budget {budget}"


def kv_headroom(i: Inputs) -> bool:
    """KV cache can hold more sequences; unmeasured counts as no headroom."""
    kv = i.snapshot.kv_usage
    return kv is not None and kv < i.settings.kv_headroom


def kv_phrase(i: Inputs) -> str:
    kv = i.snapshot.kv_usage
    return "KV usage unmeasured" if kv is None else f"KV usage {fmt_pct(kv)}"


def preempting(i: Inputs) -> bool:
    rate = i.snapshot.preemption_rate
    return rate is not None and rate > i.settings.preemption_rate_max


def at_active_cap(i: Inputs) -> bool:
    """Running per pod is near the active cap, so the cap is what limits the decode batch."""
    running, cap = i.per_pod(i.snapshot.running), i.active_cap
    return running is not None and cap is not None and running >= i.settings.near_cap * cap


def cap_would_bind(i: Inputs, factor: float) -> bool:
    """Lowering the active cap to `factor` x cap would cut the decode batch pods run now.

    A fixed "near the cap" threshold misses the common case of ITL over SLO at, say, 80% of a
    generous cap: a cut that lands below the current batch does shrink it.
    """
    running, cap = i.per_pod(i.snapshot.running), i.active_cap
    # budget moves round down to whole sequences, so compare with the value that would be set
    return running is not None and cap is not None and running > math.floor(factor * cap)


def requests_wait(i: Inputs) -> bool:
    waiting = i.per_pod(i.snapshot.waiting)
    return waiting is not None and waiting >= i.settings.waiting_per_pod


def capacity_phrase(i: Inputs) -> str:
    """Arrivals per pod against the trusted capacity, naming its source (tuning/capacity.py)."""
    known, rate = trusted_capacity(i), i.snapshot.request_rate
    if known is None:
        learned = "unknown"
    elif known.source == "model":
        learned = f"{known.per_pod:.2f}/s from the engine model"
    else:
        at = "" if known.at is None else f" learned {known.at:%H:%M:%S}Z"
        learned = f"{known.per_pod:.2f}/s{at}"
    per_pod = "?" if rate is None or not i.rates_trusted else f"{rate / i.pods:.2f}/s"
    return f"arrivals {per_pod} per pod (capacity {learned})"


def running_phrase(i: Inputs) -> str:
    running, waiting = i.per_pod(i.snapshot.running), i.per_pod(i.snapshot.waiting)
    cap = "unknown" if i.active_cap is None else str(i.active_cap)
    run = "?" if running is None else f"{running:.1f}"
    wait = "?" if waiting is None else f"{waiting:.1f}"
    return f"{run} running and {wait} waiting per pod (active cap {cap})"
