"""What a tuning pass reports besides status.tuning: the fleet it saw, the figures, TuningActive.

Pure builders of status fragments; tuning/plan.py puts them into the pass's status patch.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from vllm_operator import constants as c
from vllm_operator.api.status import MetricsStatus
from vllm_operator.status.conditions import set_condition
from vllm_operator.status.summarize import read_rollout
from vllm_operator.tuning.model import Decision, FleetView, MetricsSnapshot


def build_fleet_view(
    deployment: dict[str, Any] | None, pods: list[dict[str, Any]] | None = None
) -> FleetView | None:
    if deployment is None:
        return None
    r = read_rollout(deployment)
    return FleetView(
        desired=r.desired,
        ready=r.ready,
        updated=r.updated,
        rolling=not r.rolled,
        ready_seconds=pod_ready_seconds(pods or []),
    )


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def pod_ready_seconds(pods: list[dict[str, Any]]) -> tuple[float, ...]:
    """Creation to Ready of each pod that is Ready: how long this service's pods take to serve
    (scheduling, image pull, model load, startup probe), the forecast's horizon (forecast.py)."""
    out: list[float] = []
    for pod in pods:
        created = _time((pod.get("metadata") or {}).get("creationTimestamp"))
        conditions = (pod.get("status") or {}).get("conditions") or []
        ready = next((c for c in conditions if c.get("type") == "Ready"), None)
        if created is None or ready is None or ready.get("status") != "True":
            continue
        became = _time(ready.get("lastTransitionTime"))
        if became is not None and became >= created:
            out.append((became - created).total_seconds())
    return tuple(sorted(out))


def build_metrics_status(snapshot: MetricsSnapshot, window: str, now: datetime) -> dict[str, Any]:
    status = MetricsStatus(
        window=window,
        observed_at=now,
        request_rate=snapshot.request_rate,
        rejection_rate=snapshot.rejection_rate,
        rejection_ratio=snapshot.rejection_ratio,
        ttft_p95_seconds=snapshot.ttft_p95,
        itl_p95_seconds=snapshot.itl_p95,
        e2e_p95_seconds=snapshot.e2e_p95,
        waiting_requests=snapshot.waiting,
        running_requests=snapshot.running,
        kv_cache_usage=snapshot.kv_usage,
        preemption_rate=snapshot.preemption_rate,
    )
    dumped: dict[str, Any] = status.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


def build_tuning_condition(
    previous: list[dict[str, Any]], decision: Decision, snapshot: MetricsSnapshot,
    generation: int, now: datetime,
) -> dict[str, Any]:  # fmt: skip
    """TuningActive: True while the tuner can see and act; False names why it holds."""
    conds = set_condition(
        [x for x in previous if x.get("type") == c.COND_TUNING_ACTIVE],
        type=c.COND_TUNING_ACTIVE,
        status="True" if snapshot.usable else "False",
        reason=decision.reason.value,  # the wire takes plain strings
        message=decision.message,
        generation=generation,
        now=now,
    )
    return conds[0]
