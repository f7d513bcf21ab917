"""Where the tuner's per-pod capacity comes from: the seam for capacity sources.

Today the only source is "observed": the arrivals per pod at which this fleet missed its SLO,
learned by scaling.py and kept in status.tuning.capacity. A capacity computed from the
calibrated engine model (the planner's evaluation, issue 14 item 1) comes in through
`decide(..., capacities=...)` as an estimate with source "model"; `trusted_capacity` is the one
place that chooses between them, and every rule that sizes by capacity asks it.
"""

from __future__ import annotations

from vllm_operator.tuning.inputs import Inputs
from vllm_operator.tuning.model import CapacityEstimate


def trusted_capacity(i: Inputs) -> CapacityEstimate | None:
    """The capacity the rules size with: what this fleet was seen to serve, else an estimate
    given to decide() (none is given today)."""
    known = i.state.capacity
    if known is not None:
        return CapacityEstimate(known.per_pod, "observed")
    given = [c for c in i.capacities if c.per_pod > 0]
    return given[0] if given else None
