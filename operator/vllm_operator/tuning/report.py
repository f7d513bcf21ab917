"""What a tuning pass reports besides status.tuning: the fleet it saw, the figures, TuningActive.

Pure builders of status fragments; tuning/plan.py puts them into the pass's status patch.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from vllm_operator import constants as c
from vllm_operator.api.durations import parse_kube_time
from vllm_operator.api.status import MetricsStatus
from vllm_operator.status.conditions import set_condition
from vllm_operator.status.pods import count_unschedulable
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
        unschedulable=count_unschedulable(pods or []),
    )


def pod_ready_seconds(pods: list[dict[str, Any]]) -> tuple[float, ...]:
    """How long each Ready pod took to serve (scheduling, image pull, model load, startup
    probe): the forecast's horizon (forecast.py). Creation to Ready; after a container restart,
    that container's start to Ready (its creation is older than this load).

    The Ready condition keeps only its last transition, so a pod that went unready and back (a
    readiness probe failing under load) shows the time of that flip. A container's startup
    probe bounds a load: the kubelet restarts a container not started within
    initialDelaySeconds + periodSeconds x failureThreshold, so a transition later than that after
    the container started is such a flip, not a load, and tells nothing."""
    out: list[float] = []
    for pod in pods:
        seconds = _load_seconds(pod)
        if seconds is not None:
            out.append(seconds)
    return tuple(sorted(out))


def _load_seconds(pod: dict[str, Any]) -> float | None:
    created = parse_kube_time((pod.get("metadata") or {}).get("creationTimestamp"))
    status = pod.get("status") or {}
    ready = next((x for x in status.get("conditions") or [] if x.get("type") == "Ready"), None)
    if created is None or ready is None or ready.get("status") != "True":
        return None
    became = parse_kube_time(ready.get("lastTransitionTime"))
    containers = [x for x in status.get("containerStatuses") or [] if isinstance(x, dict)]
    started = [
        parse_kube_time(((x.get("state") or {}).get("running") or {}).get("startedAt"))
        for x in containers
    ]
    last_start = max((t for t in started if t is not None), default=None)
    restarted = any(_int(x.get("restartCount")) > 0 for x in containers)
    if restarted and last_start is None:
        return None  # restarted, and when the running container started is unknown
    start = last_start if restarted and last_start is not None else created
    if became is None or became < start:
        return None  # clock skew, or a transition older than this container
    budget = _startup_budget(pod)
    if (
        budget is not None
        and last_start is not None
        and (became - last_start).total_seconds() > budget
    ):
        return None
    return (became - start).total_seconds()


def _startup_budget(pod: dict[str, Any]) -> float | None:
    """The longest any container's startup probe lets it take to start, if every one has one."""
    budgets: list[float] = []
    for container in (pod.get("spec") or {}).get("containers") or []:
        probe = container.get("startupProbe") if isinstance(container, dict) else None
        if not isinstance(probe, dict):
            return None
        budgets.append(
            _int(probe.get("initialDelaySeconds"))
            + max(_int(probe.get("periodSeconds"), 10), 1)
            * max(_int(probe.get("failureThreshold"), 3), 1)
        )
    return max(budgets, default=None)


def _int(value: Any, default: int = 0) -> int:
    # Kubernetes' defaults: periodSeconds 10, failureThreshold 3, initialDelaySeconds 0
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default
    )


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
