"""The workload one pod of a VLLMService sees, from a snapshot: what the capacity model sizes for.

Arrivals are the snapshot's request rate (admitted + refused, so a fleet that sheds load still
shows what its clients sent) over the pods that reported, as Poisson arrivals; the prompt and
output lengths are vLLM's per-request token histograms over the same window
(`MetricsSnapshot.prompt_lengths` / `output_lengths`). The GPU and model are the spec's.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.planning.workload import Workload
from vllm_operator.tuning.model import MetricsSnapshot

# Verdicts whose figures describe the pods that reported: "partial" still holds what the ready
# pods served (new pods loading do not change their figures); stale, invalid, error and missing
# figures describe nothing.
_MEASURED = frozenset({"ok", "partial"})


@dataclass(frozen=True)
class ServiceLoad:
    """One pod's share of the service's arrivals, on the spec's GPU and model."""

    workload: Workload  # Poisson at the per-pod rate, lengths from the histograms
    gpu: str
    gpus_per_pod: int
    model: str
    pods: int  # the pods the rate was shared over


@dataclass(frozen=True)
class Unmeasured:
    """Why no workload can be read from the snapshot (one clause)."""

    reason: str


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
        ),
        gpu=spec.gpu.type,
        gpus_per_pod=spec.gpu.count,
        model=spec.model,
        pods=share,
    )
