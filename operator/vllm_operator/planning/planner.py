"""`plan()`: the search on every GPU type asked for, and the cheapest recommendation of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vllm_operator.planning.evaluate import Point, Setting
from vllm_operator.planning.search import (
    NoPlanError,
    Plan,
    Progress,
    Search,
    rank,
    search_gpu,
    search_sweep,
)
from vllm_operator.planning.workload import (
    Stats,
    Workload,
    build_arrivals,
    busiest_slice,
    closed_stats,
    compute_stats,
)


@dataclass(frozen=True)
class Sweep:
    knob: str  # vLLM dest name
    values: tuple[int, ...]


@dataclass(frozen=True)
class PlanResult:
    chosen: Plan
    plans: tuple[Plan, ...]
    points: tuple[Point, ...]  # every evaluation on every GPU type, in order
    stats: Stats  # of what was searched
    whole_stats: Stats | None  # of the whole workload, when a slice was searched
    sliced: bool


def plan(
    workload: Workload,
    gpus: Sequence[str],
    setting: Setting,
    *,
    max_replicas: int,
    sweep: Sweep | None = None,
    progress: Progress | None = None,
) -> PlanResult:
    """Raises NoPlanError (the closest point across GPU types) when nothing meets the SLO."""
    if workload.kind == "closed":
        scope = whole = None
        stats, whole_stats = closed_stats(workload), None
    else:
        arrivals = build_arrivals(workload)
        scope = busiest_slice(arrivals, workload.horizon)
        whole = arrivals if scope is not arrivals else None
        stats = compute_stats(scope)
        whole_stats = compute_stats(whole) if whole is not None else None
    search = Search(setting, workload, scope, whole, max_replicas, progress)
    plans: list[Plan] = []
    failures: list[NoPlanError] = []
    for gpu in gpus:
        try:
            if sweep is None:
                plans.append(search_gpu(search, gpu, stats))
            else:
                plans.append(search_sweep(search, gpu, stats, sweep.knob, sweep.values))
        except NoPlanError as exc:
            failures.append(exc)
        except ValueError as exc:  # the model does not start on this GPU at all
            failures.append(NoPlanError(str(exc), None))
    if not plans:
        closest = [f for f in failures if f.closest is not None]
        if not closest:
            raise failures[0]
        raise min(closest, key=lambda f: f.closest.worst_ratio(setting.target))  # type: ignore[union-attr]
    chosen = min(plans, key=lambda p: rank(p.recommendation, setting))
    return PlanResult(
        chosen, tuple(plans), tuple(search.points), stats, whole_stats, whole is not None
    )
