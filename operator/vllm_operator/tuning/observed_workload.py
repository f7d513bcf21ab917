"""The workload one pod of a VLLMService sees, from a snapshot: what the capacity model sizes for.

Arrivals are the snapshot's request rate (admitted + refused, so a fleet that sheds load still
shows what its clients sent) over the pods that reported, as Poisson arrivals, in bursts as big
as the window's counts say (`burst_size`); the prompt and output lengths are vLLM's per-request
token histograms over the same window (`MetricsSnapshot.prompt_lengths` / `output_lengths`).
The GPU and model are the spec's.

Why bursts: the code trace's arrivals (67 in one second at most) vary per 30 s about 47 times as
much as Poisson arrivals of the same rate. Replayed as Poisson, its window on three H100 pods
looked within the SLO (TTFT p95 0.31 s, 99% of requests in it) where the trace put half its
requests out of it (TTFT p95 2.4 s, ITL p95 338 ms): the model saw no problem to fix and a
capacity several times what a pod served (bench/results/arrival_burstiness.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.planning.workload import Workload
from vllm_operator.tuning.model import MetricsSnapshot

# Verdicts whose figures describe the pods that reported: "partial" still holds what the ready
# pods served (new pods loading do not change their figures); stale, invalid, error and missing
# figures describe nothing.
_MEASURED = frozenset({"ok", "partial"})
# A dispersion under this is read as Poisson arrivals: from the ten 30 s counts of a 5-minute
# window (the largest change left out), Poisson arrivals measure 3 or more in 0.06% of windows
# (median 0.63, p99 2.05; 200,000 windows simulated at 3, 30 and 300 requests a bin).
POISSON_UP_TO = 3.0
# Burst sizes are kept to a grid of steps of sqrt(2), so that one service's passes ask the
# capacity cache for a few workloads, not a new one for each window's noise.
BURST_STEPS_PER_DOUBLING = 2
MAX_BURST = 1024.0


@dataclass(frozen=True)
class ServiceLoad:
    """One pod's share of the service's arrivals, on the spec's GPU and model."""

    workload: Workload  # Poisson at the per-pod rate, lengths from the histograms, its bursts
    gpu: str
    gpus_per_pod: int
    model: str
    pods: int  # the pods the rate was shared over


@dataclass(frozen=True)
class Unmeasured:
    """Why no workload can be read from the snapshot (one clause)."""

    reason: str


def burst_size(dispersion: float | None, pods: int = 1) -> float:
    """The mean burst (requests) one of `pods` pods gets, for the fleet's arrival dispersion:
    bursts of geometric size m give a dispersion of 2 m - 1 (somewhat less as measured, its
    largest change left out; the replay's BURST_SECONDS was fitted to a trace through that same
    measure), and a Service spreads a burst over its pods; 1 (plain Poisson) when not measured
    or under POISSON_UP_TO, on a grid above."""
    if dispersion is None or not math.isfinite(dispersion) or dispersion < POISSON_UP_TO:
        return 1.0
    per_pod = (dispersion + 1) / 2 / max(1, pods)
    if per_pod <= 1:
        return 1.0
    steps = round(math.log2(per_pod) * BURST_STEPS_PER_DOUBLING)
    return min(MAX_BURST, 2 ** (steps / BURST_STEPS_PER_DOUBLING))


def reporting_pods(snapshot: MetricsSnapshot, fallback: int) -> int:
    """Pods the snapshot's totals come from: those scraped, else the ready ones, else
    `fallback` (the replica count); at least 1."""
    fleet = snapshot.fleet
    reported = snapshot.pods_scraped or (fleet.ready if fleet is not None else 0)
    return max(1, reported or fallback)


def observed_workload(
    spec: VLLMServiceSpec, snapshot: MetricsSnapshot, pods: int | None = None
) -> ServiceLoad | Unmeasured:
    """What one pod serves now; Unmeasured says which figure is missing."""
    if snapshot.quality not in _MEASURED:
        return Unmeasured(f"the metrics are {snapshot.quality}")
    rate = snapshot.request_rate
    if rate is None or rate <= 0:
        return Unmeasured("no requests in the window")
    prompt, output = snapshot.prompt_lengths, snapshot.output_lengths
    if prompt is None or output is None:
        which = "prompt" if prompt is None else "generation"
        return Unmeasured(f"no vllm:request_{which}_tokens histogram in the window")
    share = pods if pods is not None else reporting_pods(snapshot, spec.replicas)
    return ServiceLoad(
        workload=Workload(
            kind="poisson",
            label="observed",
            rate=rate / share,
            prompt=prompt,
            output=output,
            burst=burst_size(snapshot.arrival_dispersion, share),
        ),
        gpu=spec.gpu.type,
        gpus_per_pod=spec.gpu.count,
        model=spec.model,
        pods=share,
    )
