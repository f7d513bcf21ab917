"""The control plane fails under the operator: components exit, the API server hangs, etcd restarts.

Every test ends with the cluster whole again (the supervisor restarts what exits), and checks
what the operator must not lose (tests/support/invariants.py).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from tests.faults.loaded import Loaded
from tests.faults.services import Creator, tuned_service
from tests.support.faults import ControlPlane, elapsed, extra_nodes
from tests.support.invariants import (
    Watchdog,
    is_ready,
    list_services,
    tuned_since,
    wait_nothing_lost,
)
from tests.support.kube import Cluster
from tests.support.operator import OperatorProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.faults

LEADERS = ("kube-scheduler", "kube-controller-manager")
# The outage the issue asks for: longer than the leader-election renew deadline (10 s), so the
# scheduler and the controller manager lose their leases and exit, as they do in a real cluster.
OUTAGE_SECONDS = 30
# a recovery slower than this says who was late (most take under 10 s; one took 53)
STRAGGLER_S = 20
SERVICES = 50  # one H100 each: more than the fleet's 16 (e2e/fleet.yaml), see EXTRA_NODES
EXTRA_NODES = 5  # H100 nodes of 8 GPUs added for the test: 56 GPUs for the 50
# what the operator logs when a call fails and kopf or a loop tries again
RETRY_LINES = re.compile(r"retry|retrying|will retry|backoff|ClientConnectorError|Timeout", re.I)


def plain_deployment(namespace: str, name: str, replicas: int = 2) -> dict[str, Any]:
    labels = {"app": name}
    pod = {"containers": [{"name": "c", "image": "none"}]}
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


def assert_pods_scheduled(apps: client.AppsV1Api, namespace: str, timeout: float = 120) -> None:
    """A new Deployment gets its pods, bound and Running: the controller manager (ReplicaSets)
    and the scheduler (binding) both work."""
    name = f"probe-{uuid.uuid4().hex[:6]}"
    apps.create_namespaced_deployment(namespace, plain_deployment(namespace, name))
    wait_until(
        lambda: (apps.read_namespaced_deployment(name, namespace).status.ready_replicas or 0) == 2,
        timeout=timeout,
        what=f"Deployment {name}: 2 pods scheduled and Running",
        interval=0.5,
    )
    apps.delete_namespaced_deployment(name, namespace)


def test_killed_scheduler_and_controller_manager_come_back(
    control_plane: ControlPlane, namespace: str, apps: client.AppsV1Api
) -> None:
    for name in LEADERS:
        old = control_plane.kill(name)
        new = control_plane.wait_restarted(name, old)
        assert new != old
        exit_ = [e for e in control_plane.events(name, "exited") if e["pid"] == old]
        assert exit_ and exit_[-1]["signal"] == "SIGKILL", exit_
    assert_pods_scheduled(apps, namespace)


def test_leaders_that_lose_their_lease_are_restarted(
    control_plane: ControlPlane, namespace: str, apps: client.AppsV1Api
) -> None:
    """A hung API server: the scheduler and the controller manager cannot renew their leases
    and exit on their own (the fault of the issue); the supervisor brings them back."""
    pids = {name: control_plane.pid(name) for name in LEADERS}
    with control_plane.frozen("kube-apiserver"):

        def both_exited() -> bool:
            return all(
                any(e["pid"] == pids[n] for e in control_plane.events(n, "exited")) for n in LEADERS
            )

        wait_until(both_exited, timeout=90, what="the leaders to exit on their lost leases")
    control_plane.wait_readyz()
    for name in LEADERS:
        exit_ = next(e for e in control_plane.events(name, "exited") if e["pid"] == pids[name])
        assert "signal" not in exit_, exit_  # they exited by themselves
        control_plane.wait_restarted(name, pids[name])
    assert_pods_scheduled(apps, namespace)


def _load_and_fault(
    cluster: Cluster,
    operator_process: OperatorProcess,
    namespace: str,
    loaded: Loaded,
    fault: Callable[[], None],
) -> dict[str, Any]:
    """Create SERVICES tuned services, inject `fault` once a third exist, and check everything
    converges with nothing lost, in `namespace` and in `loaded`'s (the tuner deciding on load
    throughout). Returns the figures the report quotes."""
    names = [f"svc-{i:02d}" for i in range(SERVICES)]
    log_mark = operator_process.log_path.stat().st_size if operator_process.log_path.exists() else 0
    op_pid = operator_process.proc.pid if operator_process.proc else None
    creator = Creator(cluster, [tuned_service(namespace, n) for n in names])
    with (
        extra_nodes(cluster, namespace, "gpu-h100-0", EXTRA_NODES),
        Watchdog(cluster, namespace) as dog,
        Watchdog(cluster, loaded.namespace) as loaded_dog,
    ):
        creator.start()
        wait_until(lambda: creator.created >= SERVICES // 3, timeout=60, what="a third created")
        t0 = time.monotonic()
        fault()
        fault_s = elapsed(t0)
        undone = datetime.now(UTC)
        wait_until(creator.done.is_set, timeout=120, what="every service created")

        stragglers: list[str] = []  # who was still not Ready STRAGGLER_S after the fault

        def converged() -> bool:
            services = list_services(cluster, namespace)
            done = len(services) == SERVICES and all(is_ready(s) for s in services)
            if not done and not stragglers and time.monotonic() - t0 > STRAGGLER_S:
                late = not_ready(cluster, namespace, at_most=5)
                stragglers.append(f"{len(services)} exist; {late}")
            return done

        try:
            wait_until(
                converged, timeout=180, what="every service Ready after the fault", interval=1
            )
        except AssertionError as exc:
            listed = len(list_services(cluster, namespace))
            raise AssertionError(
                f"{exc}\n{listed} of {SERVICES} services exist (the client created"
                f" {creator.created})\n{not_ready(cluster, namespace)}\n"
                f"operator log:\n{operator_process.log_tail(80)}"
            ) from None
        recovery_s = elapsed(t0)
        # A child lost in the fault (a create the API server dropped) is the resync timer's to
        # repair (VLLM_OPERATOR_RESYNC_SECONDS=30 in tests): wait for it, and say how long.
        try:
            lost = wait_nothing_lost(
                cluster,
                namespace,
                names,
                timeout=90,
                what="nothing lost: one Deployment, Service and live ReplicaSet per service",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\noperator log:\n{operator_process.log_tail(80)}") from None
        whole_s = elapsed(t0)
        loaded_lost = wait_nothing_lost(
            cluster,
            loaded.namespace,
            loaded.names,
            timeout=90,
            what="nothing lost in the loaded services",
        )
        wait_until(
            lambda: tuned_since(cluster, loaded.namespace, loaded.names, undone),
            timeout=120,
            what="a tuning pass on every loaded service after the fault",
            interval=0.5,
        )
        tuned_s = elapsed(t0)
    creator.stop()
    assert operator_process.proc is not None and operator_process.proc.poll() is None, (
        f"the operator exited:\n{operator_process.log_tail()}"
    )
    assert operator_process.proc.pid == op_pid  # the same process: no crash loop
    assert dog.violations == [], dog.violations
    assert loaded_dog.violations == [], loaded_dog.violations
    with operator_process.log_path.open("rb") as f:
        f.seek(log_mark)
        retries = sum(1 for line in f if RETRY_LINES.search(line.decode(errors="replace")))
    return {
        "fault_s": fault_s,
        "recovery_s": recovery_s,
        "whole_s": whole_s,
        "operator_retry_lines": retries,
        "client_retries": creator.retries,
        "watchdog_polls_failed": dog.failed_polls,
        # what assert_nothing_lost found missing after every service was Ready: the child the
        # resync timer had to repair (the etcd scenario's open question, docs/reliability.md)
        "lost_meanwhile": lost,
        "stragglers": stragglers,
        "loaded_lost_meanwhile": loaded_lost,
        "loaded_tuned_again_s": tuned_s,
    }


def not_ready(cluster: Cluster, namespace: str, at_most: int | None = None) -> str:
    """One line per service that is not Ready: its generations, its Ready condition, and what
    the cluster did with its Deployment (whether the controller manager saw it, its pods), so a
    failure tells an operator that did not act from a cluster that did not follow."""
    apps, core = client.AppsV1Api(cluster.api), client.CoreV1Api(cluster.api)
    deps = {d.metadata.name: d for d in apps.list_namespaced_deployment(namespace).items}
    pods = core.list_namespaced_pod(namespace).items
    lines = []
    for svc in list_services(cluster, namespace):
        if not is_ready(svc):
            name, status = svc["metadata"]["name"], svc.get("status") or {}
            ready = next(
                (c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {}
            )
            lines.append(
                f"{name}: generation {svc['metadata']['generation']}, "
                f"observed {status.get('observedGeneration')}, Ready={ready.get('status')} "
                f"{ready.get('reason')}: {ready.get('message')}; {deployment_line(deps.get(name))}"
                f"; pods {phases(pods, name)}"
            )
    more = len(lines) - at_most if at_most is not None and len(lines) > at_most else 0
    shown = lines[:at_most] if more else lines
    tail = [f"... and {more} more"] if more else []
    return f"{len(lines)} not Ready:\n" + ("\n".join(shown + tail) or "(none listed)")


def phases(pods: list[Any], name: str) -> list[str]:
    return sorted(p.status.phase for p in pods if p.metadata.name.startswith(f"{name}-"))


def deployment_line(dep: Any) -> str:
    if dep is None:
        return "no Deployment"
    st = dep.status
    return (
        f"Deployment generation {dep.metadata.generation} observed {st.observed_generation},"
        f" replicas {dep.spec.replicas} updated {st.updated_replicas} ready {st.ready_replicas}"
    )


def hang_api_server(control_plane: ControlPlane) -> None:
    with control_plane.frozen("kube-apiserver"):
        # the fault's length, not a wait for something: the API server is hung this long
        time.sleep(OUTAGE_SECONDS)


def restart_etcd(control_plane: ControlPlane) -> None:
    control_plane.restart("etcd")
    control_plane.wait_readyz()


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(hang_api_server, id=f"api-server-hung-{OUTAGE_SECONDS}s"),
        # Known defect, under investigation: in one CI run of five the services did not all get
        # back to Ready within 180 s of the etcd restart (docs/reliability.md). It runs in
        # `make faults` until that is understood, and its failure names the services and why.
        pytest.param(restart_etcd, id="etcd-sigkill", marks=pytest.mark.long),
    ],
)
def test_control_plane_fault_while_services_are_created(
    cluster: Cluster,
    operator_process: OperatorProcess,
    control_plane: ControlPlane,
    namespace: str,
    record_property: Any,
    loaded: Loaded,
    fault: Callable[[ControlPlane], None],
) -> None:
    figures = _load_and_fault(
        cluster, operator_process, namespace, loaded, lambda: fault(control_plane)
    )
    for key, value in figures.items():
        record_property(key, value)
    print(f"\nfault figures ({fault.__name__}): {figures}")
