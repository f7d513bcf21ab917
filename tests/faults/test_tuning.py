"""Faults in the middle of the control loop: the operator killed during a budget rollout, and
Prometheus restarting under a steady service while its twins' counters reset.

The tuner keeps no memory but status.tuning (tuning/persist.py): whatever breaks, the next pass
must read the same story from status and neither redo nor forget what was decided.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from tests.faults.services import tuned_service
from tests.faults.specs import STEADY, STEADY_LOAD
from tests.support.faults import (
    ControlPlane,
    elapsed,
    kill_operator,
    kill_twins,
    start_prometheus,
    stop_prometheus,
    wait_twins_restarted,
)
from tests.support.harness import Harness
from tests.support.invariants import Watchdog, assert_nothing_lost, wait_nothing_lost
from tests.support.kube import Cluster
from tests.support.load import BackgroundLoad
from tests.support.operator import OperatorProcess
from tests.support.vllmsvc import condition, decisions, epoch_seconds, flag, get, start
from tests.support.wait import wait_until

pytestmark = pytest.mark.faults

QUEUE_FLAG = "--max-num-queued-reqs"
JUDGED = ("RetuneKept", "RollbackWorse")
ACTIONS = ("ScaleReplicas", "SetBudget", "Rollback")  # every decision that changes something


def template_flag(apps: client.AppsV1Api, namespace: str, name: str, flag_name: str) -> str | None:
    dep = apps.read_namespaced_deployment(name, namespace)
    return flag(dep.spec.template.spec.containers[0].args, flag_name)


def owned_replica_sets(apps: client.AppsV1Api, namespace: str, name: str) -> list[Any]:
    """Every ReplicaSet of the Deployment, live or not: one per pod template it has rolled to."""
    uid = apps.read_namespaced_deployment(name, namespace).metadata.uid
    return [
        rs
        for rs in apps.list_namespaced_replica_set(namespace).items
        if any(r.uid == uid for r in rs.metadata.owner_references or [])
    ]


def rolled_out(apps: client.AppsV1Api, namespace: str, name: str) -> bool:
    dep = apps.read_namespaced_deployment(name, namespace)
    st, want = dep.status, dep.spec.replicas
    return (
        (st.observed_generation or 0) >= dep.metadata.generation
        and (st.updated_replicas or 0) == want
        and (st.replicas or 0) == want
        and (st.ready_replicas or 0) == want
    )


def restart_operator(op: OperatorProcess) -> None:
    if op.proc is None:
        op.start()


@pytest.mark.long  # about a minute: the retune, the scheduler's lease, the judgement
def test_operator_killed_mid_budget_rollout_finishes_it_and_judges_it_once(
    cluster: Cluster,
    operator_process: OperatorProcess,
    control_plane: ControlPlane,
    namespace: str,
    harness: Harness,
    apps: client.AppsV1Api,
    record_property: Any,
) -> None:
    """503s over budget with TTFT headroom: the tuner raises maxRequests 2 -> 4 (a SetBudget, a
    restart of the pods). The operator is SIGKILLed once the Deployment carries the new flag and
    its new pod cannot be scheduled yet (kube-scheduler held down: the rollout cannot finish
    before the kill). After the restart the rollout completes, the pending change in status is
    judged, the restart is counted once, and no second retune starts."""
    name = "retuned"
    obj = tuned_service(
        namespace,
        name,
        budgets={"queue": {"maxRequests": 2}, "running": {"maxSeqs": 4}},
        autoscaling=None,  # the budget is the only lever: no scale-up instead of the retune
        autotune={
            "mode": "Auto",
            "bounds": {"maxRequests": {"min": 2, "max": 8}},  # room for a second raise
            "maxRestartsPerHour": 2,  # and the budget for it: only status can prevent it
        },
    )
    url = start(cluster, harness, obj)
    load = BackgroundLoad(url, rate=14, duration=240, prompt=200, output=100).start()
    try:
        with Watchdog(cluster, namespace) as dog:
            with control_plane.held_down("kube-scheduler"):

                def raised_flag() -> str | None:
                    value = template_flag(apps, namespace, name, QUEUE_FLAG)
                    return value if value != "2" else None

                raised = wait_until(
                    raised_flag,
                    timeout=120,
                    what="the Deployment's template to carry the raised maxRequests",
                )
                assert not rolled_out(apps, namespace, name)  # its new pod waits for a scheduler
                pending = get(cluster, "vllmservice", namespace, name)["status"]["tuning"]
                assert pending["pending"]["field"] == "maxRequests", pending
                assert pending["pending"].get("settledAt") is None, pending
                killed_at = datetime.now(UTC).timestamp()
                assert kill_operator(operator_process) == -9
                t0 = time.monotonic()
                operator_process.start()
            # the scheduler is back (a new leader once the old lease expires): the rollout runs
            wait_until(
                lambda: rolled_out(apps, namespace, name),
                timeout=90,
                what="the interrupted rollout to complete",
                interval=0.5,
            )
            rollout_s = elapsed(t0)
            wait_until(
                lambda: any(
                    flag(t["args"], QUEUE_FLAG) == raised
                    for t in harness.ready_twins(namespace, name).values()
                ),
                timeout=60,
                what=f"a twin running {QUEUE_FLAG} {raised}",
            )

            def judged() -> list[dict[str, Any]]:
                return [
                    d
                    for d in decisions(cluster, namespace, name)
                    if d["reason"] in JUDGED and epoch_seconds(d["time"]) > killed_at
                ]

            verdict = wait_until(judged, timeout=120, what="the pending change judged", interval=1)
            judged_s = elapsed(t0)
    finally:
        load.join(timeout=0)
        restart_operator(operator_process)
    tuning = get(cluster, "vllmservice", namespace, name)["status"]["tuning"]
    moves = [d for d in tuning["lastDecisions"] if d["action"] in ACTIONS]
    retunes = [d for d in moves if d["action"] == "SetBudget"]
    assert len(retunes) == 1 and retunes[0]["toValue"] == int(raised), moves
    rollbacks = [d for d in moves if d["action"] == "Rollback"]
    # the restart is counted once: the retune's, plus one per rollback (which undoes it)
    assert len(tuning["restartTimes"]) == 1 + len(rollbacks), tuning
    # the judgement is of this change (a Hold record names it in its message, a Rollback in field)
    change = f"queue.maxRequests 2 -> {raised}"
    assert verdict[0].get("field") == "maxRequests" or change in verdict[0]["message"], verdict
    # one pod template per change: the original and the raised one (a rollback returns to the
    # original's ReplicaSet); a second retune would have made a third
    assert len(owned_replica_sets(apps, namespace, name)) == 2
    assert dog.violations == [], dog.violations
    assert_nothing_lost(cluster, namespace, [name])
    record_property("rollout_done_s", rollout_s)
    record_property("judged_s", judged_s)
    print(
        f"\noperator SIGKILL mid-rollout: rollout done {rollout_s}s, judged"
        f" ({verdict[0]['reason']}: {verdict[0]['message']}) {judged_s}s after the restart"
    )


def tuning_reason(cluster: Cluster, namespace: str, name: str) -> tuple[str, str]:
    cond = condition(get(cluster, "vllmservice", namespace, name), "TuningActive")
    return cond.get("status", ""), cond.get("reason", "")


def test_prometheus_restart_and_counter_resets_hold_with_a_reason_and_move_nothing(
    cluster: Cluster,
    operator_process: OperatorProcess,
    namespace: str,
    harness: Harness,
    apps: client.AppsV1Api,
    record_property: Any,
) -> None:
    """A service well within its SLO at minReplicas, its budgets fitted to the load (by the
    model no move raises what a pod serves: with the default valve of 8 a steady pod at its
    floor, its replica lever with room, gets rule 9b's capacity bet, docs/tuning.md): nothing to
    do, so any move is the fault's. Prometheus stops (the tuner holds and names why), starts
    again on its stored data (a scrape gap in every series), then every twin is killed and
    restarted by the harness (the counters of the same series go back to zero). The tuner holds
    with a named reason (HoldMetricsError while Prometheus is down) while its figures cannot be
    trusted, resumes after, and changes neither replicas nor budgets."""
    name = "steady"
    obj = tuned_service(namespace, name, **STEADY)
    url = start(cluster, harness, obj)
    template = apps.read_namespaced_deployment(name, namespace).spec.template.spec.containers[0]
    load = BackgroundLoad(url, duration=240, **STEADY_LOAD).start()
    holds: set[str] = set()

    def tuning_is(status: str) -> bool:
        seen, reason = tuning_reason(cluster, namespace, name)
        if seen == "False":
            holds.add(reason)
        return seen == status

    try:
        with Watchdog(cluster, namespace) as dog:
            fault_at = datetime.now(UTC).timestamp()
            t0 = time.monotonic()
            stop_prometheus()
            try:
                wait_until(
                    lambda: tuning_is("False"), timeout=60, what="the tuner to hold", interval=0.5
                )
                held_s = elapsed(t0)
            finally:
                start_prometheus()
            t1 = time.monotonic()
            wait_until(
                lambda: tuning_is("True"), timeout=90, what="the tuner to resume", interval=0.5
            )
            resumed_s = elapsed(t1)
            before = kill_twins(harness, namespace, name)
            t2 = time.monotonic()
            wait_twins_restarted(harness, namespace, name, before)
            reset_at = datetime.now(UTC).timestamp()

            def passes_over_the_reset() -> bool:
                # the 20 s rate window of a pass after this holds the reset: rate() must cope
                tuning = get(cluster, "vllmservice", namespace, name)["status"]["tuning"]
                late = epoch_seconds(tuning["lastEvaluated"]) > reset_at + 25
                return tuning_is("True") and late

            wait_until(
                passes_over_the_reset, timeout=90, what="tuner passes over the reset", interval=0.5
            )
            reset_s = elapsed(t2)
    finally:
        load.join(timeout=0)
    moves = [
        d
        for d in decisions(cluster, namespace, name)
        if d["action"] in ACTIONS and epoch_seconds(d["time"]) >= fault_at
    ]
    assert moves == [], [(d.get("reason"), d.get("message")) for d in moves]
    dep = apps.read_namespaced_deployment(name, namespace)
    assert dep.spec.replicas == 1
    assert dep.spec.template.spec.containers[0].args == template.args
    # Prometheus down: the query failed; the restarted pods were not ready for a moment
    assert "HoldMetricsError" in holds and all(r.startswith("Hold") for r in holds), holds
    assert dog.violations == [], dog.violations
    wait_nothing_lost(cluster, namespace, [name], timeout=60, what="the service Ready and whole")
    record_property("held_s", held_s)
    record_property("resumed_s", resumed_s)
    record_property("reset_s", reset_s)
    print(
        f"\nprometheus restart: held ({sorted(holds)}) {held_s}s after the stop, resumed"
        f" {resumed_s}s after the start; twins reset, {reset_s}s of passes over it, no move"
    )
