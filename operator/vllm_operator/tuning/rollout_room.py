"""Whether a budget change's rollout may stop pods: only those the load does not need.

A budget change restarts every pod (docs/rollouts.md §3). Where a GPU of the type is free the
rollout surges: a new pod is ready before an old one stops, and capacity never drops. Without
one it goes pod by pod (`maxUnavailable 1`, plus the pods no node places), and for a pod's ready
time each the pods left serving carry the whole load. At a peak that is capacity the load
needs: on bench l4-3b-valve8-gpus4/diurnal (all four GPUs in use) the x2 valve step, rolled pod
by pod at the diurnal peak, took 3 seeds of 5 to 82-87% of windows in SLO and 3.8-4.3% 503s,
against 89% and 2.3% with replicas alone, while the same step made early, with a pod to spare,
lost nothing (docs/benchmarks.md). Rule 1b's sums price the restarts with the model's
one-pod-fewer replay, and still made a move on l4-3b-gpus2/diurnal that took the only serving
pod of two at the peak.

So a budget change whose rollout cannot surge is made only while the pods that keep serving,
the ready ones but one, carry the larger of the present arrivals and the forecast a ready time
ahead at forecast_headroom x the trusted capacity: the margin rule 8 adds pods with
(scaling.forecast_pods). Otherwise it is blocked with RolloutNeedsPods and, when the tuner has
not looked for a free GPU yet, the pass asks for that look (Inputs.asks_spare_gpu): with one
the rollout surges and the move is made. A single replica rolls with surge 1 (the new pod waits
for a GPU while the old one serves) and a canary starts one extra pod: neither stops a serving
pod. Without a trusted capacity or a measured rate the tuner cannot tell, and the step goes on
as before, judged by rule 1.
"""

from __future__ import annotations

from vllm_operator.tuning.capacity import trusted_capacity
from vllm_operator.tuning.forecast import forecast
from vllm_operator.tuning.inputs import Inputs, canary_on
from vllm_operator.tuning.outcome import Blocked
from vllm_operator.tuning.reasons import Reason
from vllm_operator.tuning.scaling import forecast_pods


def rollout_blocker(i: Inputs) -> Blocked | None:
    """Blocked when a pod-by-pod restart would stop pods the load needs (module doc)."""
    if i.spare_gpu is True or i.replicas <= 1 or canary_on(i.spec):
        return None
    known, rate, ahead = trusted_capacity(i), i.snapshot.request_rate, forecast(i)
    if known is None or rate is None:
        return None
    fleet = i.snapshot.fleet
    serving = i.pods if fleet is None else fleet.ready
    load = max(rate, ahead.rate if ahead is not None else rate)
    need = forecast_pods(i, load, known.per_pod)
    if need <= serving - 1:
        return None
    free = "no GPU of the type free for a surge pod" if i.spare_gpu is False else (
        "no free GPU of the type known for a surge pod"
    )  # fmt: skip
    phrase = (
        f"{free}, and a pod-by-pod restart would leave {serving - 1} of {serving} ready pods "
        f"serving {load:.2f}/s that needs {need} at {i.settings.forecast_headroom:.0%} of "
        f"capacity {known.per_pod:.2f}/s ({known.source})"
    )
    return Blocked(Reason.ROLLOUT_NEEDS_PODS, phrase, asks_spare_gpu=i.spare_gpu is None)
