"""A spec pass reads a starting service's pods from the pod watch's table (deps.pods_of), as
status passes do, and lists them only when the watch has not listed yet."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.component.handlers import LOG, NAME, NAMESPACE, deployment, deps_for, example, service
from tests.support.fake_kube import FakeKube
from vllm_operator import constants as c
from vllm_operator.handlers.reconcile import reconcile

NOW = datetime(2026, 12, 5, 14, tzinfo=UTC)
STUCK = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."


class CountingLists(FakeKube):
    def __init__(self) -> None:
        super().__init__()
        self.pod_lists = 0

    def list(self, api_version: str, kind: str, *args: Any, **kw: Any) -> list[dict[str, Any]]:
        self.pod_lists += kind == "Pod"
        return super().list(api_version, kind, *args, **kw)


def pending_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{NAME}-abc", "namespace": NAMESPACE,
                     "labels": {c.LABEL_SERVICE: NAME, c.LABEL_MANAGED_BY: c.MANAGED_BY}},
        "status": {"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": c.REASON_UNSCHEDULABLE,
            "message": STUCK,
        }]},
    }  # fmt: skip


def starting(kube: CountingLists) -> None:
    """A service whose Deployment has pods, none ready, one of them waiting for a node."""
    kube.put(example("minimal.yaml"))
    reconcile(service(kube), deps=deps_for(kube, NOW), logger=LOG)
    dep = deployment(kube)
    kube.set_status("apps/v1", "Deployment", NAMESPACE, NAME, {
        "observedGeneration": dep["metadata"]["generation"], "replicas": 1, "updatedReplicas": 1,
    })  # fmt: skip
    kube.put(pending_pod())
    kube.pod_lists = 0


def degraded(kube: FakeKube) -> dict[str, Any]:
    conditions = service(kube)["status"]["conditions"]
    return next(cond for cond in conditions if cond["type"] == "Degraded")


def test_a_spec_pass_takes_the_pods_from_the_pod_watch() -> None:
    kube = CountingLists()
    starting(kube)
    deps = deps_for(kube, NOW)
    table = {(NAMESPACE, NAME): [pending_pod()]}
    deps.pods_of = table.get
    reconcile(service(kube), deps=deps, logger=LOG)
    assert kube.pod_lists == 0
    assert degraded(kube)["reason"] == c.REASON_UNSCHEDULABLE
    assert STUCK in degraded(kube)["message"]


def test_before_the_pod_watch_has_listed_the_pass_lists_the_pods() -> None:
    kube = CountingLists()
    starting(kube)
    reconcile(service(kube), deps=deps_for(kube, NOW), logger=LOG)  # pods_of says None
    assert kube.pod_lists == 1
    assert degraded(kube)["reason"] == c.REASON_UNSCHEDULABLE
