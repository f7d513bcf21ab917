"""The recommendation as a ready VLLMService: replicas, budgets, SLO, autoscaling, autotune.

Autoscaling spans the replicas the plan needs at the busiest load (the recommendation) down to
what the workload's mean rate needs, and up by half for headroom; autotune (Recommend) may move
each budget the plan set within half to twice its value (maxActiveSeqs up to maxSeqs, which the
tuner never moves: docs/tuning.md).
"""

from __future__ import annotations

import math
from typing import Any

from vllm_operator.planning.candidate import Candidate, Target, build_service, check_service
from vllm_operator.planning.workload import Stats


def replica_range(
    c: Candidate, busy: Stats, mean: Stats | None, max_replicas: int
) -> tuple[int, int]:
    low = c.replicas
    if mean is not None and busy.rate > 0:
        low = max(1, math.ceil(c.replicas * mean.rate / busy.rate))
    high = min(max(c.replicas + 1, math.ceil(c.replicas * 1.5)), max(max_replicas, c.replicas))
    return min(low, c.replicas), high


def budget_bounds(c: Candidate) -> dict[str, tuple[int, int]]:
    bounds: dict[str, tuple[int, int]] = {}
    seqs = c.budget("max_num_seqs")
    if seqs is not None:
        bounds["max_num_active_seqs"] = (max(1, seqs // 2), seqs)
    batched = c.budget("max_num_batched_tokens")
    if batched is not None:
        bounds["max_num_batched_tokens"] = (max(seqs or 1, batched // 2), batched * 2)
    for dest in ("max_num_queued_reqs", "max_num_queued_tokens"):
        value = c.budget(dest)
        if value is not None:
            bounds[dest] = (max(1, value // 2), value * 2)
    return bounds


def build_recommended_service(
    c: Candidate,
    *,
    model: str,
    name: str,
    namespace: str | None,
    target: Target,
    busy: Stats,
    mean: Stats | None,
    max_replicas: int,
) -> dict[str, Any]:
    """The manifest; ValueError if the API model or the renderer would refuse it (a bug)."""
    manifest = build_service(
        c,
        model=model,
        name=name,
        namespace=namespace,
        target=target,
        autoscaling=replica_range(c, busy, mean, max_replicas),
        bounds=budget_bounds(c),
    )
    problem = check_service(manifest)
    if problem is not None:
        raise ValueError(f"the recommended VLLMService is refused: {problem}")
    return manifest
