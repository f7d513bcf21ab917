"""No status write lands on a status newer than the read it was prepared from (status_write.py).

Each test prepares a pass from a read, lets a newer pass write first, then runs the older one:
without the resourceVersion precondition its write would put the older view back.
"""

from __future__ import annotations

from typing import Any

from tests.component.handlers import (
    LOG,
    condition,
    deployment,
    deps_for,
    example,
    serve,
    service,
)
from tests.support.fake_kube import FakeKube
from vllm_operator import constants as c
from vllm_operator.handlers.children import Seen
from vllm_operator.handlers.reconcile import reconcile
from vllm_operator.handlers.status_write import tuner_read_holds
from vllm_operator.handlers.tune import write_tuner_status

from .test_reconcile_handler import NOW


def tuner_patch(**tuning: Any) -> dict[str, Any]:
    meta = {"name": "chat", "namespace": "team-a"}
    return {"apiVersion": c.API_VERSION, "kind": c.KIND, "metadata": meta,
            "status": {"tuning": tuning}}  # fmt: skip


def test_a_pass_read_before_a_spec_edit_does_not_put_the_older_generation_back() -> None:
    kube = FakeKube()
    deps = deps_for(kube, NOW)
    serve(kube, example("minimal.yaml"), deps)
    stale = service(kube)  # e.g. the resync loop's listed copy
    kube.put(example("minimal.yaml", replicas=3))  # the user edits the spec
    reconcile(service(kube), deps=deps, logger=LOG)
    assert service(kube)["status"]["observedGeneration"] == 2

    reconcile(stale, deps=deps, logger=LOG)  # its write is refused; it runs again on a fresh read

    assert service(kube)["status"]["observedGeneration"] == 2
    assert deployment(kube)["spec"]["replicas"] == 3  # the children follow the newer spec


def test_a_pass_that_lands_late_does_not_put_ready_back_to_false() -> None:
    kube = FakeKube()
    deps = deps_for(kube, NOW)
    kube.put(example("minimal.yaml"))
    stale_body = service(kube)  # a create pass's read: no status yet
    reconcile(service(kube), deps=deps, logger=LOG)
    stale_dep = deployment(kube)  # what that pass saw of the new Deployment
    serve(kube, example("minimal.yaml"), deps)  # meanwhile the rollout ends and Ready is written
    assert condition(service(kube), c.COND_READY)["status"] == "True"

    # the older pass writes last (held up, as an etcd restart holds a request up)
    seen = Seen(children={"Deployment": stale_dep}, only=frozenset({"Deployment"}))
    reconcile(stale_body, deps=deps, logger=LOG, seen=seen)

    assert condition(service(kube), c.COND_READY)["status"] == "True"


def test_a_deployment_event_older_than_a_pass_read_does_not_flip_ready() -> None:
    # the pod watch's pass reads 3/3 ready; kopf then delivers the Deployment's older 2/3 event
    kube = FakeKube()
    deps = deps_for(kube, NOW)
    serve(kube, example("minimal.yaml", replicas=3), deps)
    dep = deployment(kube)
    kube.set_status(
        "apps/v1", "Deployment", "team-a", "chat", {**dep["status"], "readyReplicas": 2}
    )
    older = deployment(kube)  # what the delayed event carries
    kube.set_status("apps/v1", "Deployment", "team-a", "chat", dep["status"])
    pods_pass = Seen(pods=[], only=frozenset({"Deployment"}))
    reconcile(service(kube), deps=deps, logger=LOG, seen=pods_pass)
    events = len(kube.events)

    late = Seen(children={"Deployment": older}, pods=[], only=frozenset({"Deployment"}))
    reconcile(service(kube), deps=deps, logger=LOG, seen=late)

    assert condition(service(kube), c.COND_READY)["status"] == "True"
    assert len(kube.events) == events  # no ReplicasNotReady Warning either

    # an event newer than anything read is used as it is
    kube.set_status(
        "apps/v1", "Deployment", "team-a", "chat", {**dep["status"], "readyReplicas": 2}
    )
    newer = Seen(children={"Deployment": deployment(kube)}, only=frozenset({"Deployment"}))
    reconcile(service(kube), deps=deps, logger=LOG, seen=newer)
    assert condition(service(kube), c.COND_READY)["message"] == "2/3 replicas ready."


def test_a_tuner_write_goes_onto_a_status_the_reconcile_moved_meanwhile() -> None:
    kube = FakeKube()
    deps = deps_for(kube, NOW)
    kube.put(example("minimal.yaml"))
    read = service(kube)  # the tuning pass reads, then the reconcile writes Ready etc.
    reconcile(service(kube), deps=deps, logger=LOG)

    write_tuner_status(deps, read, tuner_patch(desiredReplicas=2), LOG)

    assert service(kube)["status"]["tuning"] == {"desiredReplicas": 2}
    assert service(kube)["status"]["observedGeneration"] == 1  # the reconcile's fields stay


def test_a_tuner_write_never_replaces_newer_tuner_memory() -> None:
    kube = FakeKube()
    deps = deps_for(kube, NOW)
    serve(kube, example("minimal.yaml"), deps)
    older = service(kube)
    write_tuner_status(deps, service(kube), tuner_patch(desiredReplicas=3), LOG)  # a newer pass

    write_tuner_status(deps, older, tuner_patch(desiredReplicas=2), LOG)

    assert service(kube)["status"]["tuning"] == {"desiredReplicas": 3}


def test_a_tuner_read_holds_while_only_fields_other_than_spec_and_memory_move() -> None:
    read = {"metadata": {"generation": 1}, "status": {"tuning": {"a": 1}}}
    assert tuner_read_holds(read, {**read, "status": {"tuning": {"a": 1}, "readyReplicas": 2}})
    assert not tuner_read_holds(read, {**read, "status": {"tuning": {"a": 2}}})
    assert not tuner_read_holds(read, {"metadata": {"generation": 2}, "status": read["status"]})
