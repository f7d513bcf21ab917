"""The pods of VLLMServices as status needs them, kept from a watch (pure).

A status pass reads a service's pods for the scheduler's and the kubelet's verdicts (a pod no
node fits, a container in crash-loop back-off) and the nodes they are bound to (status.gpu).
`PodTable` keeps just that per (namespace, service), from a LIST and the watch events after it,
and says which services to pass again: those with a pod that has just become stuck. A pod that
stays stuck (the scheduler retrying, a container restarting in back-off) is no news; its next
Deployment event or the resync reports the rest. Level-based: the table after any sequence of
events is the table of the objects they leave (tests/unit/test_pod_table.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from vllm_operator import constants as c

ServiceKey = tuple[str, str]  # (namespace, VLLMService name)
PodKey = tuple[str, str]  # (namespace, pod name)


def selector_for(name: str) -> str:
    """The label selector of a VLLMService's pods."""
    return f"{c.LABEL_SERVICE}={name}"


def unschedulable(pod: dict[str, Any]) -> str | None:
    """The scheduler's message when no node fits the pod (None: placed, or not tried yet)."""
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == c.REASON_UNSCHEDULABLE:
            return str(cond.get("message", ""))
    return None


def count_unschedulable(pods: Iterable[dict[str, Any]]) -> int:
    """Pods no node fits (e.g. none has a free GPU of the type) and not being deleted: a pod
    on its way out is leaving, not waiting (the tuner's replica cap, the rollout's allowance)."""
    return sum(
        1
        for pod in pods
        if unschedulable(pod) is not None
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
    )


def crash_looping(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The statuses of the pod's containers that the kubelet restarts in back-off."""
    return [
        cs
        for cs in pod.get("status", {}).get("containerStatuses") or []
        if (cs.get("state", {}).get("waiting") or {}).get("reason") == c.REASON_CRASH_LOOP
    ]


def stuck_reason(pod: dict[str, Any]) -> str | None:
    """Why the pod cannot come up by itself: Unschedulable, CrashLoopBackOff, or None."""
    if unschedulable(pod) is not None:
        return c.REASON_UNSCHEDULABLE
    return c.REASON_CRASH_LOOP if crash_looping(pod) else None


def trim(pod: dict[str, Any]) -> dict[str, Any]:
    """What status reads of a pod; the rest of a watched pod (its spec, managed fields) goes."""
    status = pod.get("status") or {}
    node = (pod.get("spec") or {}).get("nodeName")
    return {
        "metadata": {"name": pod["metadata"]["name"]},
        "spec": {"nodeName": node} if node else {},
        "status": {k: list(status.get(k) or []) for k in ("conditions", "containerStatuses")},
    }


def service_of(pod: dict[str, Any]) -> ServiceKey | None:
    meta = pod.get("metadata") or {}
    parent = (meta.get("labels") or {}).get(c.LABEL_SERVICE)
    return (meta.get("namespace") or "", parent) if parent else None


@dataclass
class PodTable:
    """Trimmed pods by service. Not thread-safe: the watch (handlers/pod_watch.py) locks it."""

    by_service: dict[ServiceKey, dict[str, dict[str, Any]]] = field(default_factory=dict)
    where: dict[PodKey, ServiceKey] = field(default_factory=dict)  # pod -> its service
    stuck: dict[PodKey, str] = field(default_factory=dict)  # pod -> its stuck_reason

    def pods_of(self, key: ServiceKey) -> list[dict[str, Any]]:
        return list(self.by_service.get(key, {}).values())

    def apply(self, type_: str, pod: dict[str, Any]) -> list[ServiceKey]:
        """One watch event (ADDED, MODIFIED, DELETED); the services to pass again."""
        pod_key = _key(pod)
        was = self.stuck.get(pod_key)
        self._forget(pod_key)
        if type_ == "DELETED":
            return []
        return self._keep(pod_key, pod, was)

    def replace(self, pods: Iterable[dict[str, Any]], namespace: str | None) -> list[ServiceKey]:
        """A fresh LIST of `namespace` (None: every namespace) replaces what was kept of it;
        the services with a pod stuck now that was not (or not for that reason) before."""
        before = dict(self.stuck)
        for pod_key in [k for k in self.where if namespace is None or k[0] == namespace]:
            self._forget(pod_key)
        news = {key for pod in pods for key in self._keep(_key(pod), pod, before.get(_key(pod)))}
        return sorted(news)

    def _keep(self, pod_key: PodKey, pod: dict[str, Any], was: str | None) -> list[ServiceKey]:
        key = service_of(pod)
        if key is None:
            return []
        self.by_service.setdefault(key, {})[pod_key[1]] = trim(pod)
        self.where[pod_key] = key
        reason = stuck_reason(pod)
        if reason is None:
            return []
        self.stuck[pod_key] = reason
        return [key] if reason != was else []

    def _forget(self, pod_key: PodKey) -> None:
        self.stuck.pop(pod_key, None)
        key = self.where.pop(pod_key, None)
        if key is None:
            return
        pods = self.by_service[key]
        pods.pop(pod_key[1], None)
        if not pods:
            del self.by_service[key]


def _key(pod: dict[str, Any]) -> PodKey:
    meta = pod.get("metadata") or {}
    return (meta.get("namespace") or "", str(meta.get("name", "")))
