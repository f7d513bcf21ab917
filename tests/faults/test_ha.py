"""HA handover during a tuning pass: the leader is SIGKILLed right after it acted, the standby
takes over, and the API server's audit log shows no action taken twice.

Two operators run as the chart's HA mode runs them (the chart's statefulset.yaml):
`run -n NS --peering P --priority 100-ordinal`, POD_ID and POD_NAMESPACE set. kopf's peering
pauses the standby's handlers; the `P-loops` Lease gates the tuning and resync loops
(handlers/leader.py). A SIGKILLed leader leaves both behind: its keep-alive and its Lease expire
on their own (the Lease after 30 s), and only then does the standby act.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.faults.services import tuned_service
from tests.support.audit import AuditLog, audit_log_path
from tests.support.faults import elapsed, kill_operator
from tests.support.harness import Harness
from tests.support.invariants import Watchdog, wait_nothing_lost
from tests.support.kube import Cluster
from tests.support.load import BackgroundLoad
from tests.support.operator import OperatorProcess, install_kopf_crds
from tests.support.vllmsvc import decisions, epoch_seconds, get, start
from tests.support.wait import wait_until

pytestmark = pytest.mark.faults

PEERING = "vllmop-ha"
LOOPS_LEASE = f"{PEERING}-loops"  # main.py: the Lease the tuning loop runs under
TUNER_FM = "vllm-operator-tuner"  # constants.FM_TUNER: the replicas patch's field manager
ACTIONS = ("ScaleReplicas", "SetBudget", "Rollback")


@pytest.fixture
def ha_pair(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str, tmp_path: Path
) -> Iterator[list[OperatorProcess]]:
    """Ordinals 0 and 1 watching `namespace`, ordinal 0 active; the session's standalone
    operator (it watches every namespace) is stopped meanwhile, so every write is the pair's."""
    install_kopf_crds(cluster)
    peering = {
        "apiVersion": "kopf.dev/v1",
        "kind": "KopfPeering",
        "metadata": {"name": PEERING, "namespace": namespace},
    }
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(peering))
    operator_process.stop()
    ops = [
        OperatorProcess(
            cluster,
            tmp_path / f"operator-{i}.log",
            env={"POD_ID": f"op-{i}", "POD_NAMESPACE": namespace},
            args=("-n", namespace, "--peering", PEERING, "--priority", str(100 - i)),
        )
        for i in range(2)
    ]
    try:
        ops[0].start()  # OrderedReady, as the StatefulSet starts them
        wait_until(lambda: "op-0" in peers(cluster, namespace), timeout=60, what="op-0 peering")
        ops[1].start()
        wait_until(lambda: len(peers(cluster, namespace)) == 2, timeout=60, what="op-1 peering")
        yield ops
    finally:
        for op in ops:
            op.stop()
        operator_process.start()


def peers(cluster: Cluster, namespace: str) -> dict[str, Any]:
    out = cluster.kubectl("get", "kopfpeering", PEERING, "-n", namespace, "-o", "json").stdout
    return {k: v for k, v in (json.loads(out).get("status") or {}).items() if v}


def lease_holder(coord: client.CoordinationV1Api, namespace: str) -> str | None:
    holder: str | None = coord.read_namespaced_lease(LOOPS_LEASE, namespace).spec.holder_identity
    return holder


def test_leader_killed_during_tuning_no_action_taken_twice(
    cluster: Cluster,
    ha_pair: list[OperatorProcess],
    namespace: str,
    harness: Harness,
    apps: client.AppsV1Api,
    record_property: Any,
) -> None:
    """503s over budget: the leader scales up and is SIGKILLed as soon as its decision is in
    status, before or after its replicas patch (the record goes first: tuning/plan.py). The
    standby takes the Lease once the leader's expires and tunes on from status, applying a
    recorded count the Deployment lacks; in the audit log every replicas patch of the tuner is
    one applied ScaleReplicas decision."""
    coord = client.CoordinationV1Api(cluster.api)
    wait_until(
        lambda: lease_holder(coord, namespace) == "op-0", timeout=60, what="op-0 holds the Lease"
    )
    name = "handover"
    obj = tuned_service(
        namespace,
        name,
        autoscaling={"enabled": True, "minReplicas": 1, "maxReplicas": 3},
        autotune={"mode": "Off"},  # replicas are the lever: each action is one replicas patch
    )
    url = start(cluster, harness, obj)
    # from here on: the reconcile's hand-over of spec.replicas (the Deployment's create, under the
    # tuner's field manager: reconcile.py) is behind the mark
    audit = AuditLog(audit_log_path())
    generation = apps.read_namespaced_deployment(name, namespace).metadata.generation
    load = BackgroundLoad(url, rate=14, duration=240, prompt=200, output=100).start()
    try:
        with Watchdog(cluster, namespace) as dog:

            def acted() -> list[dict[str, Any]]:
                return [d for d in decisions(cluster, namespace, name) if d["action"] in ACTIONS]

            wait_until(acted, timeout=90, what="the leader's first scaling decision", interval=0.3)
            killed_at = datetime.now(UTC).timestamp()
            assert kill_operator(ha_pair[0]) == -9
            t0 = time.monotonic()
            wait_until(
                lambda: lease_holder(coord, namespace) == "op-1",
                timeout=90,
                what="op-1 to take the Lease",
                interval=0.5,
            )
            lease_s = elapsed(t0)

            def tuned_by_the_standby() -> bool:
                tuning = get(cluster, "vllmservice", namespace, name)["status"]["tuning"]
                return epoch_seconds(tuning["lastEvaluated"]) > killed_at + lease_s + 2

            wait_until(tuned_by_the_standby, timeout=60, what="op-1's tuning passes", interval=0.5)
            tuned_s = elapsed(t0)
            wait_nothing_lost(
                cluster,
                namespace,
                [name],
                timeout=120,
                what="the service Ready on its replicas with nothing lost",
            )
            whole_s = elapsed(t0)
    finally:
        load.join(timeout=0)
    # lastDecisions keeps the newest 10 records: the action count comes from the Deployment, whose
    # generation moves once per spec change; the tuner's patches change only spec.replicas (the
    # template stays: autotune Off, one ReplicaSet), so a patch taken twice (the same step from
    # the same place) is a patch that moved no generation
    dep = apps.read_namespaced_deployment(name, namespace)
    patches = audit.writes(namespace, "deployments", TUNER_FM)
    moved = dep.metadata.generation - generation
    assert len(patches) == moved >= 1, (
        [(p["requestReceivedTimestamp"], p["responseStatus"]["code"]) for p in patches],
        (generation, dep.metadata.generation),
        decisions(cluster, namespace, name),
    )
    assert len(apps.list_namespaced_replica_set(namespace).items) == 1
    scales = [d for d in decisions(cluster, namespace, name) if d["action"] == "ScaleReplicas"]
    steps = [(d["fromValue"], d["toValue"]) for d in scales]
    # each step recorded starts where the one before ended, the last where the Deployment is
    assert all(a[1] == b[0] for a, b in itertools.pairwise(steps)), steps
    assert not steps or steps[-1][1] == dep.spec.replicas, (steps, dep.spec.replicas)
    assert dog.violations == [], dog.violations
    record_property("lease_taken_s", lease_s)
    record_property("standby_tuning_s", tuned_s)
    record_property("whole_s", whole_s)
    print(
        f"\nHA handover: op-1 held the Lease {lease_s}s after the SIGKILL, tuned {tuned_s}s,"
        f" nothing lost {whole_s}s; scale steps {steps}, tuner replicas patches {len(patches)}"
    )
