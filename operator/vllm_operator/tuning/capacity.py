"""Where the tuner's per-pod capacity comes from, and which source it trusts.

Two sources. "observed": the arrivals per pod at which this fleet missed its SLO, learned by
scaling.py and kept in status.tuning.capacity (raised when pods serve more with headroom).
"model": what one pod with the budgets in force serves within the SLO for the workload the
service sees, computed with the calibrated engine model (tuning/model_capacity.py) and given to
`decide(..., capacities=...)`. `trusted_capacity` is the one place that chooses, and every rule
that sizes by capacity asks it:

- model only (no miss yet): the model. This is what lets the tuner scale up before the first
  miss and scale down where it never missed.
- both: the lower, so a miss caps the model. A fleet that missed at a rate below the model's
  figure shows the model is optimistic for this service (a traffic mix its buckets do not
  capture, noisy neighbours), and a capacity too high costs SLO windows, which are worse than
  GPU-hours. A model figure below the observed one is kept, because the observed one is read
  from a window that may lag the load, not a measurement of a limit, unless the observed one is
  far above it (OBSERVED_FAR_ABOVE x): pods that served that much within the SLO disprove the
  model for this service, and the observed figure is trusted.
- observed only (no model estimate: no histograms, no engine profile): the observed one.

A scale-down sizes with `down_capacity`: the same choice, with the model's figure no higher
than the median of the passes of the last `forecast_window`. The model's figure moves by a
bucket step (tuning/model_capacity.py), ~10%, when the observed lengths cross a bucket edge;
sized with a pass's higher figure, a scale-down landed where the next pass, back in the lower
bucket, added the pod again (l4-3b/ramp in bench/control_loop, seed 1: 3 -> 2 -> 3 within 60 s,
3 windows missed). The median rather than the lowest: the lowest of a 10-minute window held
pods through every brief dip of a trace's lengths (docs/benchmarks.md).
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from vllm_operator.tuning.inputs import Inputs
from vllm_operator.tuning.model import CapacityEstimate

OBSERVED_FAR_ABOVE = 1.5


def model_estimate(i: Inputs) -> CapacityEstimate | None:
    """The model's estimate given to decide(), when there is a usable one."""
    given = [c for c in i.capacities if c.source == "model" and c.per_pod > 0]
    return given[0] if given else None


def trusted_capacity(i: Inputs) -> CapacityEstimate | None:
    """The capacity the rules size with (see the module doc for the choice)."""
    known, model = i.state.capacity, model_estimate(i)
    observed = None if known is None else CapacityEstimate(known.per_pod, "observed", known.at)
    if observed is None or model is None:
        return observed or model
    if observed.per_pod > OBSERVED_FAR_ABOVE * model.per_pod:
        return observed
    return observed if observed.per_pod < model.per_pod else model


def down_capacity(i: Inputs) -> CapacityEstimate | None:
    """The capacity a scale-down fits (see the module doc): `trusted_capacity`, with the model's
    figure no higher than the median the passes of the last `forecast_window` remember."""
    trusted = trusted_capacity(i)
    if trusted is None or trusted.source != "model":
        return trusted
    since = i.now - i.settings.forecast_window
    seen = [s.capacity for s in i.state.arrivals if s.capacity is not None and s.at >= since]
    typical = statistics.median_low(seen) if seen else trusted.per_pod
    return trusted if typical >= trusted.per_pod else replace(trusted, per_pod=typical)
