"""A twin crash-looping under load: the harness kills one pod's twin again and again (it restarts
each with a growing back-off and reports the pod not Ready, its container in CrashLoopBackOff, as
a kubelet would). The service says Degraded with the reason; the tuner does not flap between
scaling up and down; once the twin stays up everything is whole again."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from tests.faults.services import tuned_service
from tests.support.faults import elapsed, kill_twins, wait_twins_restarted
from tests.support.harness import Harness
from tests.support.invariants import (
    Watchdog,
    condition,
    direction_changes,
    list_services,
    wait_nothing_lost,
)
from tests.support.kube import Cluster
from tests.support.load import BackgroundLoad
from tests.support.operator import OperatorProcess
from tests.support.vllmsvc import start
from tests.support.wait import wait_until

pytestmark = pytest.mark.faults

# back-offs 0.5, 1, 2, 4 and 8 s: the last crashes last long enough for any pass to see them
CRASHES = 5


def crash_looping(cluster: Cluster, namespace: str) -> bool:
    (svc,) = list_services(cluster, namespace)
    degraded = condition(svc, "Degraded")
    return degraded.get("status") == "True" and degraded.get("reason") == "CrashLoopBackOff"


def twin_back(harness: Harness, namespace: str, name: str, pod: str, restarts: int) -> bool:
    twin = harness.service(namespace, name)["twins"].get(pod, {})
    return bool(twin.get("restarts", 0) > restarts and twin.get("ready"))


def test_a_crash_looping_twin_degrades_the_service_without_flapping(
    cluster: Cluster,
    operator_process: OperatorProcess,
    namespace: str,
    harness: Harness,
    core: client.CoreV1Api,
    record_property: Any,
) -> None:
    name = "crashy"
    obj = tuned_service(
        namespace,
        name,
        replicas=2,
        autoscaling={"enabled": True, "minReplicas": 2, "maxReplicas": 3},
        autotune={"mode": "Off"},
    )
    url = start(cluster, harness, obj)
    load = BackgroundLoad(url, rate=2, duration=240, prompt=200, output=100).start()
    seen_degraded = 0
    try:
        with Watchdog(cluster, namespace) as dog:
            t0 = time.monotonic()
            for _ in range(CRASHES):
                twins = harness.service(namespace, name)["twins"]
                # the pod that crashed most (a scale-down may have taken it: then another)
                pod = max(sorted(twins), key=lambda p: twins[p]["restarts"])
                before = kill_twins(harness, namespace, name, pod)

                wait_until(
                    lambda p=pod, n=before[pod]: (
                        crash_looping(cluster, namespace)
                        or twin_back(harness, namespace, name, p, n)
                    ),
                    timeout=60,
                    what=f"{pod}: Degraded or back",
                )
                seen_degraded += crash_looping(cluster, namespace)
                wait_twins_restarted(harness, namespace, name, before)
            crashed_s = elapsed(t0)
            t1 = time.monotonic()
            wait_nothing_lost(
                cluster,
                namespace,
                [name],
                timeout=90,
                what="the service Ready and whole once the twin stays up",
            )
            recovered_s = elapsed(t1)
    finally:
        load.join(timeout=0)
    assert seen_degraded >= 1 and (name, "Degraded", "CrashLoopBackOff") in dog.conditions, (
        seen_degraded,
        dog.conditions,
    )
    (svc,) = list_services(cluster, namespace)
    assert condition(svc, "Degraded").get("status") == "False", svc["status"]["conditions"]
    moves = dog.replicas.get(name, [])
    assert direction_changes(moves) <= 1, moves  # up then down at most: no flapping
    pods = core.list_namespaced_pod(namespace).items
    counts = sorted(cs.restart_count for p in pods for cs in p.status.container_statuses or [])
    assert counts[-1] == CRASHES, counts  # the kubelet's count, as the harness reported it
    assert dog.violations == [], dog.violations
    record_property("crash_loop_s", crashed_s)
    record_property("recovered_s", recovered_s)
    print(
        f"\ncrash loop: {CRASHES} crashes in {crashed_s}s, Degraded CrashLoopBackOff seen at"
        f" {seen_degraded} of them, whole {recovered_s}s after the last; replicas {moves}"
    )
