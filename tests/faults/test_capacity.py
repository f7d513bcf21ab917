"""GPUs run out: pods that cannot be scheduled, and a GPU node lost under the pods.

The fleet (e2e/fleet.yaml): two L4 nodes of 4 GPUs, two H100 nodes of 8. A service of 4-GPU L4
pods fits two; a third stays Pending for good.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.faults.services import tuned_service
from tests.support.faults import delete_node, elapsed
from tests.support.harness import Harness
from tests.support.invariants import (
    Watchdog,
    condition,
    list_services,
    wait_nothing_lost,
)
from tests.support.kube import Cluster
from tests.support.load import BackgroundLoad
from tests.support.operator import OperatorProcess
from tests.support.vllmsvc import decisions
from tests.support.wait import wait_until

pytestmark = pytest.mark.faults


def apply(cluster: Cluster, obj: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj))


def only(cluster: Cluster, namespace: str) -> dict[str, Any]:
    (svc,) = list_services(cluster, namespace)
    return svc


def test_unschedulable_pods_do_not_block_the_scale_down(
    cluster: Cluster,
    operator_process: OperatorProcess,
    namespace: str,
    harness: Harness,
    apps: client.AppsV1Api,
    record_property: Any,
) -> None:
    """Three replicas wanted, two fit, the two that run are idle: the service says Unschedulable
    and the tuner scales down past the Pending pod (before the fix it held HoldMetricsPartial
    for good), until every pod it keeps is Ready."""
    obj = tuned_service(
        namespace,
        "short",
        gpu="L4",
        model="Qwen/Qwen2.5-3B-Instruct",
        replicas=3,
        autoscaling={"enabled": True, "minReplicas": 1, "maxReplicas": 3},
        autotune={"mode": "Off"},
    )
    obj["spec"]["gpu"]["count"] = 4
    with Watchdog(cluster, namespace) as dog:
        apply(cluster, obj)

        def scaled_down() -> bool:
            return apps.read_namespaced_deployment("short", namespace).spec.replicas < 3

        # status.tuning.lastDecisions keeps the newest 10: the scale-down's entry is read while
        # it is there, not after later passes may have pushed it out
        downs: list[dict[str, Any]] = []

        def scale_down_decided() -> bool:
            downs.extend(
                d
                for d in decisions(cluster, namespace, "short")
                if d["action"] == "ScaleReplicas" and d["reason"] == "ScaleDownLowLoad"
            )
            return bool(downs)

        t0 = time.monotonic()
        wait_until(scaled_down, timeout=150, what="a scale-down while a pod is Pending")
        scale_s = elapsed(t0)
        wait_until(scale_down_decided, timeout=60, what="the scale-down's decision in status")
        wait_nothing_lost(
            cluster,
            namespace,
            ["short"],
            timeout=120,
            what="the service Ready on the pods that fit",
        )
        whole_s = elapsed(t0)
    assert ("short", "Degraded", "Unschedulable") in dog.conditions, dog.conditions
    assert dog.violations == [], dog.violations
    svc = only(cluster, namespace)
    assert condition(svc, "Degraded").get("status") != "True", svc["status"]
    assert any(d["fromValue"] == 3 for d in downs), downs
    record_property("scale_down_s", scale_s)
    record_property("ready_s", whole_s)
    print(f"\nunschedulable: scaled down after {scale_s}s, Ready after {whole_s}s")


def test_unschedulable_pods_cap_the_replica_lever_of_a_busy_service(
    cluster: Cluster,
    operator_process: OperatorProcess,
    namespace: str,
    harness: Harness,
    apps: client.AppsV1Api,
    record_property: Any,
) -> None:
    """Three replicas wanted, two fit, and the two that run refuse requests at their valve:
    the tuner reads their figures and names the cluster (NoFreeGPU) where it used to hold
    HoldPodsNotReady for good, and asks for no pod that could not be placed either."""
    obj = tuned_service(
        namespace,
        "busy",
        gpu="L4",
        model="Qwen/Qwen2.5-3B-Instruct",
        replicas=3,
        budgets={"queue": {"maxRequests": 2}, "running": {"maxSeqs": 4}},
        autoscaling={"enabled": True, "minReplicas": 1, "maxReplicas": 4},
        autotune={"mode": "Off"},  # the replica lever only: the cap is all there is to say
    )
    obj["spec"]["gpu"]["count"] = 4
    with Watchdog(cluster, namespace) as dog:
        apply(cluster, obj)
        url = wait_until(
            lambda: (
                harness.service(namespace, "busy").get("url")
                if len(harness.ready_twins(namespace, "busy")) == 2
                else None
            ),
            timeout=120,
            what="the two pods that fit serving",
        )
        load = BackgroundLoad(url, rate=12, duration=300, prompt=200, output=100).start()
        t0 = time.monotonic()
        try:

            def capped() -> list[dict[str, Any]]:
                return [
                    d for d in decisions(cluster, namespace, "busy") if d["reason"] == "NoFreeGPU"
                ]

            (first, *_) = wait_until(capped, timeout=180, what="a NoFreeGPU hold", interval=1)
            capped_s = elapsed(t0)
        finally:
            load.join(timeout=0)
    assert "pods unschedulable: no node has a free L4 GPU" in first["message"], first
    assert ("busy", "Degraded", "Unschedulable") in dog.conditions, dog.conditions
    assert apps.read_namespaced_deployment("busy", namespace).spec.replicas == 3
    reasons = [d["reason"] for d in decisions(cluster, namespace, "busy")]
    assert "ScaleUpRejections" not in reasons, reasons  # no fourth pod to wait beside the third
    record_property("capped_s", capped_s)
    print(f"\nunschedulable under load: NoFreeGPU after {capped_s}s")


H100_NODES = ("gpu-h100-0", "gpu-h100-1")


@pytest.mark.long
@pytest.mark.parametrize("where", ["another-node", "fallback-type"])
def test_pods_of_a_lost_node_move(
    cluster: Cluster,
    operator_process: OperatorProcess,
    namespace: str,
    core: client.CoreV1Api,
    record_property: Any,
    where: str,
) -> None:
    """A GPU node carrying the service's pods is deleted: kube-controller-manager's pod GC
    removes the pods bound to the missing node and their replacements land elsewhere, with
    nothing lost. "another-node": the other H100 node. "fallback-type": every H100 node is
    lost, and the pods move to the A100 node the spec declares as its fallback type, which
    status.gpu.resolvedType then names."""
    obj = tuned_service(namespace, "moved", replicas=2, autoscaling=None, autotune={"mode": "Off"})
    if where == "fallback-type":
        obj["spec"]["gpu"]["fallbackTypes"] = ["A100-80GB"]
    apply(cluster, obj)
    wait_nothing_lost(cluster, namespace, ["moved"], timeout=90, what="the service Ready")
    pods = core.list_namespaced_pod(namespace).items
    lost = [pods[0].spec.node_name] if where == "another-node" else list(H100_NODES)
    manifests = [delete_node(core, name) for name in lost]
    t0 = time.monotonic()
    try:
        with Watchdog(cluster, namespace) as dog:

            def moved() -> bool:
                now = core.list_namespaced_pod(namespace).items
                running = [p for p in now if p.status.phase == "Running"]
                return len(running) == 2 and all(p.spec.node_name not in lost for p in running)

            wait_until(moved, timeout=150, what=f"the pods off {lost}", interval=1)
            wait_nothing_lost(
                cluster, namespace, ["moved"], timeout=60, what="the service Ready again"
            )
            if where == "fallback-type":
                wait_until(
                    lambda: (
                        only(cluster, namespace)["status"]["gpu"].get("resolvedType") == "A100-80GB"
                    ),
                    timeout=60,
                    what="status.gpu.resolvedType naming the fallback type the pods got",
                )
        recovery_s = elapsed(t0)
    finally:
        for manifest in manifests:
            core.create_node(manifest)
    assert dog.violations == [], dog.violations
    record_property("recovery_s", recovery_s)
    print(f"\nnode(s) {lost} lost ({where}): pods moved and Ready after {recovery_s}s")


@pytest.mark.long
def test_a_node_loss_with_no_room_anywhere_is_reported_and_recovers(
    cluster: Cluster,
    operator_process: OperatorProcess,
    namespace: str,
    core: client.CoreV1Api,
    record_property: Any,
) -> None:
    """Every H100 node is lost and the spec declares no fallback type: the replacement pods
    cannot be scheduled anywhere, and the service says so (`Degraded`, reason Unschedulable)
    instead of reporting a rollout in progress; once the nodes are back it is Ready with
    nothing lost."""
    obj = tuned_service(namespace, "stuck", replicas=2, autoscaling=None, autotune={"mode": "Off"})
    apply(cluster, obj)
    wait_nothing_lost(cluster, namespace, ["stuck"], timeout=90, what="the service Ready")
    manifests = [delete_node(core, name) for name in H100_NODES]
    t0 = time.monotonic()
    try:
        with Watchdog(cluster, namespace) as dog:

            def reported() -> bool:
                degraded = condition(only(cluster, namespace), "Degraded")
                return degraded.get("status") == "True" and degraded.get("reason") == (
                    "Unschedulable"
                )

            wait_until(reported, timeout=180, what="Degraded=True, reason Unschedulable")
            reported_s = elapsed(t0)
            for manifest in manifests:
                core.create_node(manifest)
            manifests = []
            wait_nothing_lost(
                cluster, namespace, ["stuck"], timeout=150, what="the service Ready again"
            )
        recovery_s = elapsed(t0)
    finally:
        for manifest in manifests:
            core.create_node(manifest)
    assert dog.violations == [], dog.violations
    svc = only(cluster, namespace)
    assert condition(svc, "Degraded").get("status") != "True", svc["status"]
    record_property("reported_s", reported_s)
    record_property("recovery_s", recovery_s)
    print(f"\nno room: Unschedulable reported after {reported_s}s, Ready after {recovery_s}s")
