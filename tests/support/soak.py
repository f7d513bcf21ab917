"""The soak: seeded random faults from the fault tier's list, under load, for as long as asked.

Every fault is one of the injection helpers of tests/support/faults.py, undone as the fault tier
undoes it (SIGCONT, the supervisor's restart, the operator started again, the node put back).
After each, the soak waits for the end state (`wait_nothing_lost`: every service Ready on its
generation, one of each child) and records how long that took and what brought the cluster
back; the Watchdog checks the invariants throughout. The schedule is a function of the seed
alone: each round is a seeded shuffle of the catalogue, and every fault draws the same numbers
from the generator whatever the cluster does, so `VLLMOP_SOAK_SEED=N` replays the same faults
with the same parameters in the same order (their timing follows the recoveries); `make soak
SOAK_SEED=N` does it on a fresh cluster.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.support.faults import (
    ControlPlane,
    delete_node,
    elapsed,
    kill_operator,
    kill_twins,
    start_prometheus,
    stop_prometheus,
    wait_twins_restarted,
)
from tests.support.harness import Harness
from tests.support.invariants import Watchdog, tuned_since, wait_nothing_lost
from tests.support.kube import Cluster
from tests.support.operator import OperatorProcess
from tests.support.wait import wait_until

RECOVERY_TIMEOUT_S = 240  # the slowest recovery the tier has seen is about a minute


@dataclass
class World:
    """What the faults act on: one namespace of tuned services with twins, under load."""

    cluster: Cluster
    control_plane: ControlPlane
    operator: OperatorProcess
    harness: Harness
    namespace: str
    names: list[str]
    lost_nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # to put back

    def restore(self) -> None:
        """Undo what a failed fault may have left: the operator down, a node deleted."""
        if self.operator.proc is None:
            self.operator.start()
        core = client.CoreV1Api(self.cluster.api)
        for name in list(self.lost_nodes):
            core.create_node(self.lost_nodes.pop(name))


@dataclass(frozen=True)
class Draw:
    """The numbers one fault takes from the generator: always both, so the schedule replays."""

    seconds: float  # a fault's length where it has one (the API server's hang)
    pick: float  # in [0, 1): which service, node or component, among those sorted by name


Inject = Callable[[World, Draw], str]  # does the fault and its undo; says what recovered it


def hang_api_server(w: World, d: Draw) -> str:
    with w.control_plane.frozen("kube-apiserver"):
        time.sleep(d.seconds)  # the fault's length, not a wait for something
    w.control_plane.wait_readyz()
    return f"SIGCONT after {d.seconds:.0f}s; the operator's watches and loops retried"


def restart_etcd(w: World, d: Draw) -> str:
    w.control_plane.restart("etcd")
    w.control_plane.wait_readyz()
    return "the supervisor restarted etcd; the pass queue retried the failed passes"


def kill_leaders(w: World, d: Draw) -> str:
    for name in ("kube-scheduler", "kube-controller-manager"):
        w.control_plane.restart(name)
    return "the supervisor restarted kube-scheduler and kube-controller-manager"


def kill_the_operator(w: World, d: Draw) -> str:
    kill_operator(w.operator)
    w.operator.start()  # as its Deployment's kubelet would
    return "the operator started again (as its pod would be), resumed from status"


def lose_a_node(w: World, d: Draw) -> str:
    core = client.CoreV1Api(w.cluster.api)
    pods = core.list_namespaced_pod(w.namespace).items
    nodes = sorted({p.spec.node_name for p in pods if p.spec.node_name})
    if not nodes:
        return "no pod was bound to a node: nothing to lose"
    lost = nodes[int(d.pick * len(nodes))]
    w.lost_nodes[lost] = delete_node(core, lost)

    def moved() -> bool:
        live = core.list_namespaced_pod(w.namespace).items
        return all(p.spec.node_name != lost for p in live)

    wait_until(moved, timeout=RECOVERY_TIMEOUT_S, what=f"the pods off the lost {lost}")
    core.create_node(w.lost_nodes.pop(lost))
    return f"kube-controller-manager's pod GC removed the pods of the lost {lost}; replaced"


def restart_prometheus(w: World, d: Draw) -> str:
    stop_prometheus()
    start_prometheus()
    return "Prometheus started again on its data (a scrape gap); the tuner held, then resumed"


def crash_twins(w: World, d: Draw) -> str:
    name = w.names[int(d.pick * len(w.names))]
    before = kill_twins(w.harness, w.namespace, name)
    wait_twins_restarted(w.harness, w.namespace, name, before)
    return f"the harness restarted {len(before)} twin(s) of {name} (counters back at zero)"


CATALOGUE: dict[str, Inject] = {
    "api-server-hung": hang_api_server,
    "etcd-sigkill": restart_etcd,
    "scheduler-and-controller-manager-sigkill": kill_leaders,
    "operator-sigkill": kill_the_operator,
    "gpu-node-lost": lose_a_node,
    "prometheus-restart": restart_prometheus,
    "twins-sigkill": crash_twins,
}
HANG_SECONDS = (5.0, 10.0, 15.0)  # compressed from the tier's 30: over the 10 s renew deadline


def schedule(seed: int) -> Iterator[tuple[str, Draw, float]]:
    """(fault, its draw, the quiet seconds before it), forever: rounds of the whole catalogue,
    each in a seeded order, so a short soak still meets different faults (pure)."""
    rng = random.Random(seed)
    while True:
        names = sorted(CATALOGUE)
        rng.shuffle(names)
        for name in names:
            draw = Draw(seconds=rng.choice(HANG_SECONDS), pick=rng.random())
            yield name, draw, round(rng.uniform(2.0, 8.0), 1)


def run_soak(w: World, *, seed: int, seconds: float, report: Path) -> dict[str, Any]:
    """Faults until `seconds` have passed; the report (also written to `report` after every
    fault, so a failure leaves what happened up to it)."""
    out: dict[str, Any] = {
        "seed": seed,
        "seconds": seconds,
        "started": _now(),
        "replay": f"make soak SOAK_SEED={seed} SOAK_SECONDS={seconds:.0f}",
        "faults": [],
    }
    started = time.monotonic()
    with Watchdog(w.cluster, w.namespace) as dog:
        try:
            for name, draw, quiet in schedule(seed):
                if time.monotonic() - started >= seconds:
                    break
                time.sleep(quiet)  # steady load between faults: the schedule's, not a wait
                out["faults"].append(_one(w, name, draw, started))
                _write(report, out, dog)
        except BaseException as exc:
            out["failed"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
            raise
        finally:
            w.restore()
            _write(report, out, dog)
    return out


def _one(w: World, name: str, draw: Draw, started: float) -> dict[str, Any]:
    record: dict[str, Any] = {"fault": name, "at_s": elapsed(started), "at": _now()}
    record["draw"] = {"seconds": draw.seconds, "pick": round(draw.pick, 3)}
    wall, t0 = time.time(), time.monotonic()
    record["recovered_by"] = CATALOGUE[name](w, draw)
    record["fault_s"] = elapsed(t0)
    record["lost_meanwhile"] = wait_nothing_lost(
        w.cluster,
        w.namespace,
        w.names,
        timeout=RECOVERY_TIMEOUT_S,
        what=f"nothing lost after {name}",
    )
    record["recovery_s"] = elapsed(t0)
    undone = datetime.now(UTC)
    wait_until(
        lambda: tuned_since(w.cluster, w.namespace, w.names, undone),
        timeout=RECOVERY_TIMEOUT_S,
        what=f"a tuning pass on every service after {name}",
        interval=0.5,
    )
    record["tuned_again_s"] = elapsed(t0)
    restarted = w.control_plane.events(event="restarted")
    record["supervisor_restarts"] = sorted(r["component"] for r in restarted if r["time"] >= wall)
    return record


def summarize(out: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per fault: how many, and the slowest and quickest recovery (pure)."""
    by: dict[str, list[float]] = {}
    for r in out["faults"]:
        by.setdefault(r["fault"], []).append(r["recovery_s"])
    return {k: {"n": len(v), "min_s": min(v), "max_s": max(v)} for k, v in sorted(by.items())}


def _write(report: Path, out: dict[str, Any], dog: Watchdog) -> None:
    out["summary"] = summarize(out)
    out["watchdog"] = {
        "polls": dog.polls,
        "failed_polls": dog.failed_polls,
        "violations": list(dog.violations),
    }
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps(out, indent=2) + "\n")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
