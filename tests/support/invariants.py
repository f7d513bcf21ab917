"""What a fault must not cost: checked continuously while it lasts, and once at the end.

`Watchdog` polls a namespace's VLLMServices and Deployments in a thread (through outages: a
failed poll is counted, not fatal) and records every violation it sees: a status whose
observedGeneration goes back, tuner memory (status.tuning) older than the newest seen, a
Deployment's replicas outside the declared bounds, tuner restarts beyond maxRestartsPerHour.
`assert_nothing_lost` is the end state: every service Ready on its current generation, spec
never written by the operator (generation unchanged), exactly one Deployment, Service and live
ReplicaSet per service, and no child without a live owner.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from kubernetes import client

from tests.support.kube import Cluster
from tests.support.vllmsvc import epoch_seconds
from tests.support.wait import wait_until

GROUP, VERSION, PLURAL = "serving.vllmop.io", "v1alpha1", "vllmservices"


def list_services(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    api = client.CustomObjectsApi(cluster.api)
    items: list[dict[str, Any]] = api.list_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, _request_timeout=5
    )["items"]
    return items


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    conds = obj.get("status", {}).get("conditions") or []
    return next((c for c in conds if c["type"] == type_), {})


def is_ready(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    current = status.get("observedGeneration") == obj["metadata"]["generation"]
    return current and condition(obj, "Ready").get("status") == "True"


class Watchdog:
    def __init__(self, cluster: Cluster, namespace: str, interval: float = 0.3) -> None:
        self.cluster, self.namespace, self.interval = cluster, namespace, interval
        self.violations: list[str] = []
        self.polls = self.failed_polls = 0
        self._observed: dict[str, int] = {}
        self._evaluated: dict[str, float] = {}  # newest status.tuning.lastEvaluated seen
        self.conditions: set[tuple[str, str, str]] = set()  # (service, type, reason) seen True
        self.replicas: dict[str, list[int]] = {}  # each Deployment's replicas, as they moved
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        apps = client.AppsV1Api(self.cluster.api)
        while not self._stop.wait(self.interval):
            try:
                services = list_services(self.cluster, self.namespace)
                deps = apps.list_namespaced_deployment(self.namespace, _request_timeout=5).items
            except Exception:  # the API server may be the fault under test
                self.failed_polls += 1
                continue
            self.polls += 1
            self.check(services, {d.metadata.name: d for d in deps})

    def check(self, services: list[dict[str, Any]], deps: dict[str, Any]) -> None:
        for svc in services:
            name, status = svc["metadata"]["name"], svc.get("status") or {}
            seen = status.get("observedGeneration")
            before = self._observed.get(name)
            if before is not None and (seen is None or seen < before):
                self.violations.append(f"{name}: observedGeneration {before} -> {seen}")
            if seen is not None:
                self._observed[name] = max(seen, before or 0)
            self._check_tuner_memory(name, status)
            for cond in status.get("conditions") or []:
                if cond.get("status") == "True":
                    self.conditions.add((name, cond["type"], cond.get("reason", "")))
            scaling = svc["spec"].get("autoscaling") or {}
            dep = deps.get(name)
            if dep is not None:
                seen_replicas = self.replicas.setdefault(name, [])
                if not seen_replicas or seen_replicas[-1] != dep.spec.replicas:
                    seen_replicas.append(dep.spec.replicas)
            if scaling.get("enabled") and dep is not None:
                low, high = scaling.get("minReplicas", 1), scaling.get("maxReplicas")
                n = dep.spec.replicas
                if n < low or (high is not None and n > high):
                    self.violations.append(f"{name}: replicas {n} outside [{low}, {high}]")
            limit = (svc["spec"].get("autotune") or {}).get("maxRestartsPerHour")
            restarts = len((status.get("tuning") or {}).get("restartTimes") or [])
            if limit is not None and restarts > limit:
                self.violations.append(f"{name}: {restarts} restarts > maxRestartsPerHour {limit}")

    def _check_tuner_memory(self, name: str, status: dict[str, Any]) -> None:
        """The tuner's memory never goes back to an older pass's: its lastEvaluated only grows."""
        stamp = (status.get("tuning") or {}).get("lastEvaluated")
        at = epoch_seconds(stamp) if stamp else None
        before = self._evaluated.get(name)
        if before is not None and (at is None or at < before):
            self.violations.append(f"{name}: status.tuning.lastEvaluated {before} -> {at}")
        if at is not None and (before is None or at > before):
            self._evaluated[name] = at


def direction_changes(values: list[int]) -> int:
    """How often a sequence turns between going up and going down (flapping counts high)."""
    steps = [b - a for a, b in itertools.pairwise(values) if b != a]
    return sum(1 for x, y in itertools.pairwise(steps) if (x > 0) != (y > 0))


def assert_nothing_lost(
    cluster: Cluster, namespace: str, names: Iterable[str], *, generation: int = 1
) -> None:
    """The end state after a fault: see the module docstring."""
    apps, core = client.AppsV1Api(cluster.api), client.CoreV1Api(cluster.api)
    services = {s["metadata"]["name"]: s for s in list_services(cluster, namespace)}
    want = sorted(names)
    assert sorted(services) == want, f"services: {sorted(services)} != {want}"
    for name, svc in services.items():
        assert is_ready(svc), f"{name} not Ready: {svc.get('status')}"
        # generation moves only with spec: the operator wrote none (it owns status only)
        assert svc["metadata"]["generation"] == generation, f"{name}: spec was written"
    uids = {s["metadata"]["uid"] for s in services.values()}
    deps = apps.list_namespaced_deployment(namespace).items
    svcs = core.list_namespaced_service(namespace).items
    for kind, objs in (("Deployment", deps), ("Service", svcs)):
        got = sorted(o.metadata.name for o in objs)
        assert got == want, f"{kind}s {got} != services {want} (duplicate or missing child)"
        for o in objs:
            owners = {r.uid for r in o.metadata.owner_references or []}
            assert owners & uids, f"{kind} {o.metadata.name} is orphaned: owners {owners}"
    for dep in deps:
        live = [
            rs
            for rs in apps.list_namespaced_replica_set(namespace).items
            if any(r.uid == dep.metadata.uid for r in rs.metadata.owner_references or [])
            and (rs.spec.replicas or 0) > 0
        ]
        assert len(live) == 1, f"{dep.metadata.name}: {len(live)} live ReplicaSets"


def wait_nothing_lost(
    cluster: Cluster, namespace: str, names: Iterable[str], *, timeout: float, what: str
) -> list[str]:
    """`assert_nothing_lost`, waited for: after a fault the last child or status write may lag
    (a child lost in it comes back with the resync timer). Returns what was lost meanwhile: each
    distinct failure seen before the end state, oldest first (empty: nothing lost at any time)."""
    want, lost = list(names), []

    def whole() -> bool:
        try:
            assert_nothing_lost(cluster, namespace, want)
        except AssertionError as exc:
            message = str(exc).splitlines()[0]
            if message not in lost:
                lost.append(message)
            raise
        return True

    wait_until(whole, timeout=timeout, what=what, interval=0.5)
    return lost


def tuned_since(cluster: Cluster, namespace: str, names: Iterable[str], since: datetime) -> bool:
    """Every named service has a tuning pass recorded after `since`: the tuner works again."""
    want = set(names)
    stamps = {
        s["metadata"]["name"]: (s.get("status") or {}).get("tuning", {}).get("lastEvaluated")
        for s in list_services(cluster, namespace)
    }
    return all(stamps.get(n) and epoch_seconds(stamps[n]) > since.timestamp() for n in want)
