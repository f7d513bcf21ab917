"""Fault injection on the local control plane, shared by every fault test (tests/faults/).

The components run under e2e/supervise.py, which restarts what exits, as a kubelet would:
`kill` a component and it comes back; `held_down` keeps it down until the block ends; `frozen`
stops it (SIGSTOP) without an exit, the closest a single machine gets to a hung or partitioned
process. Every wait is on a condition: a new pid in kwokctl's pid file, /readyz answering.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.support.harness import Harness
from tests.support.kube import ROOT, Cluster, _cluster_env
from tests.support.operator import OperatorProcess
from tests.support.wait import wait_until


@dataclass(frozen=True)
class ControlPlane:
    cluster: Cluster
    cluster_dir: Path  # kwokctl's: pids/, logs/
    supervise_dir: Path  # e2e/supervise.py's: events.jsonl, hold/

    def pid(self, name: str) -> int:
        return int((self.cluster_dir / "pids" / f"{name}.pid").read_text().strip())

    def events(self, name: str | None = None, event: str | None = None) -> list[dict[str, Any]]:
        """The supervisor's record of exits and restarts, oldest first."""
        path = self.supervise_dir / "events.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [
            r
            for r in rows
            if (name is None or r["component"] == name) and (event is None or r["event"] == event)
        ]

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL) -> int:
        """Send `sig` to the component; return the pid it had."""
        pid = self.pid(name)
        os.kill(pid, sig)
        return pid

    def wait_restarted(self, name: str, old_pid: int, timeout: float = 60) -> int:
        """Wait until the supervisor has started `name` again; return the new pid."""

        def restarted() -> int | None:
            rows = [r for r in self.events(name, "restarted") if r["pid"] != old_pid]
            return rows[-1]["pid"] if rows and _alive(rows[-1]["pid"]) else None

        what = f"{name} restarted by the supervisor"
        new: int = wait_until(restarted, timeout=timeout, what=what)
        return new

    def restart(self, name: str, timeout: float = 60) -> int:
        """SIGKILL `name` and wait for the supervisor to bring it back."""
        return self.wait_restarted(name, self.kill(name), timeout)

    @contextmanager
    def frozen(self, name: str) -> Iterator[int]:
        """SIGSTOP for the block, SIGCONT after: the process hangs and never exits."""
        pid = self.kill(name, signal.SIGSTOP)
        try:
            yield pid
        finally:
            os.kill(pid, signal.SIGCONT)

    @contextmanager
    def held_down(self, name: str) -> Iterator[int]:
        """Kill `name` and keep it down for the block; the supervisor restarts it after."""
        hold = self.supervise_dir / "hold" / name
        hold.touch()
        try:
            pid = self.kill(name)
            wait_until(lambda: not _alive(pid), timeout=30, what=f"{name} to exit")
            yield pid
        finally:
            hold.unlink()
        self.wait_restarted(name, pid)

    def wait_readyz(self, timeout: float = 90) -> None:
        def ready() -> bool:
            out = self.cluster.kubectl("get", "--raw", "/readyz", check=False)
            return out.returncode == 0 and out.stdout.strip() == "ok"

        wait_until(ready, timeout=timeout, what="kube-apiserver /readyz", interval=0.5)


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except (FileNotFoundError, IndexError):
        return False


def stop_prometheus() -> None:
    subprocess.run([str(ROOT / "e2e" / "cluster.sh"), "prometheus", "stop"], check=True, timeout=60)


def start_prometheus() -> None:
    cmd = [str(ROOT / "e2e" / "cluster.sh"), "prometheus", "start"]
    subprocess.run(cmd, check=True, timeout=120)


def node_manifest(core: client.CoreV1Api, name: str) -> dict[str, Any]:
    """A kwok node as it can be created again: its labels, kwok's annotations and its GPUs."""
    node = core.read_node(name)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": dict(node.metadata.labels or {}),
            "annotations": {
                k: v
                for k, v in (node.metadata.annotations or {}).items()
                if k.startswith(("kwok.x-k8s.io/", "node.alpha.kubernetes.io/"))
            },
        },
        "status": {"allocatable": node.status.allocatable, "capacity": node.status.capacity},
    }


def delete_node(core: client.CoreV1Api, name: str) -> dict[str, Any]:
    """Delete a kwok node; return its manifest so the test can put it back."""
    manifest = node_manifest(core, name)
    core.delete_node(name)
    return manifest


@contextmanager
def extra_nodes(
    cluster: Cluster, namespace: str, like: str, count: int, timeout: float = 120
) -> Iterator[list[str]]:
    """`count` more kwok nodes made like `like` (same labels and GPUs), for a test that needs
    more GPUs than the fleet (e2e/fleet.yaml) has. On the way out the namespace's VLLMServices
    are deleted and their pods are gone from these nodes before the nodes go, so nothing of
    this test is left Pending to take the fleet's GPUs from the next one."""
    core = client.CoreV1Api(cluster.api)
    base = node_manifest(core, like)
    names = [f"{like}-extra-{i}" for i in range(count)]
    for name in names:
        labels = {**base["metadata"]["labels"], "kubernetes.io/hostname": name}
        core.create_node({**base, "metadata": {**base["metadata"], "name": name, "labels": labels}})
    try:
        yield names
    finally:
        cluster.kubectl("delete", "vllmservices", "--all", "-n", namespace, "--wait=false")

        def drained() -> bool:
            pods = core.list_namespaced_pod(namespace).items
            return not any(p.spec.node_name in names for p in pods)

        wait_until(drained, timeout=timeout, what=f"{namespace}: no pod left on {names}")
        for name in names:
            core.delete_node(name)


def kill_operator(op: OperatorProcess) -> int:
    """SIGKILL the operator (no shutdown hooks run); return its exit status."""
    assert op.proc is not None, "the operator is not running"
    op.proc.kill()
    code = op.proc.wait(timeout=30)
    op.proc = None
    return code


def kill_twins(
    harness: Harness, namespace: str, name: str, pod: str | None = None
) -> dict[str, int]:
    """SIGKILL every running twin of the service, or only `pod`'s (the harness restarts each, as
    a kubelet restarts a crashed container: same pod, same port, counters back at zero, the pod
    not Ready meanwhile); return the restarts each pod's twin had before, for
    `wait_twins_restarted`."""
    before = {}
    for pod_name, twin in harness.service(namespace, name).get("twins", {}).items():
        if twin.get("exitCode") is None and pod in (None, pod_name):
            os.kill(twin["pid"], signal.SIGKILL)
            before[pod_name] = twin["restarts"]
    assert before, f"{namespace}/{name}: no running twin to kill"
    return before


def wait_twins_restarted(
    harness: Harness, namespace: str, name: str, before: dict[str, int], timeout: float = 60
) -> None:
    """Every pod in `before` has a newer twin, ready."""

    def restarted() -> bool:
        twins = harness.service(namespace, name).get("twins", {})
        return all(
            pod in twins and twins[pod]["restarts"] > n and twins[pod]["ready"]
            for pod, n in before.items()
        )

    wait_until(restarted, timeout=timeout, what=f"{namespace}/{name}: twins restarted and ready")


def elapsed(since: float) -> float:
    return round(time.monotonic() - since, 1)


@pytest.fixture(scope="session")
def control_plane(cluster: Cluster) -> ControlPlane:
    env = _cluster_env()
    missing = [k for k in ("VLLMOP_KWOK_CLUSTER_DIR", "VLLMOP_SUPERVISE_DIR") if not env.get(k)]
    if missing:
        pytest.fail(f"e2e/cluster.sh env gives no {missing}: re-run `e2e/cluster.sh up`")
    sup = Path(env["VLLMOP_SUPERVISE_DIR"])
    if not (sup / "events.jsonl").exists():
        pytest.fail(f"no supervisor records in {sup}: bring the cluster up with e2e/cluster.sh up")
    return ControlPlane(cluster, Path(env["VLLMOP_KWOK_CLUSTER_DIR"]), sup)
