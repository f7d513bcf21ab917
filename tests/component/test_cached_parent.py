"""Status passes and the resync run on the newest copy of the service, not a GET of it
(handlers/cached_parent.py); a copy older than the stored object never reaches the children."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.component.handlers import (
    LOG,
    NAME,
    NAMESPACE,
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
from vllm_operator.handlers.reconcile import reconcile, reconcile_by_name

from .test_reconcile_handler import NOW


class CountingKube(FakeKube):
    def __init__(self) -> None:
        super().__init__()
        self.gets: Counter[str] = Counter()

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.gets[kind] += 1
        return super().get(api_version, kind, namespace, name)


def deployment_event() -> Seen:
    return Seen(only=frozenset({"Deployment"}))


def test_a_status_pass_and_an_idle_resync_read_no_vllmservice() -> None:
    kube = CountingKube()
    deps = deps_for(kube, NOW)
    serve(kube, example("minimal.yaml"), deps)  # its status writes leave the newest copy
    kube.gets.clear()
    writes = kube.writes

    reconcile_by_name(NAMESPACE, NAME, deps=deps, logger=LOG)  # the resync of a Ready service
    assert kube.gets[c.KIND] == 0 and kube.writes == writes

    dep = deployment(kube)  # a pod goes away: the Deployment's event
    kube.set_status("apps/v1", "Deployment", NAMESPACE, NAME, {**dep["status"], "readyReplicas": 0})
    seen = Seen(children={"Deployment": deployment(kube)}, only=frozenset({"Deployment"}))
    reconcile_by_name(NAMESPACE, NAME, deps=deps, logger=LOG, seen=seen)

    assert kube.gets[c.KIND] == 0
    assert condition(service(kube), c.COND_READY)["status"] == "False"


def test_a_copy_older_than_the_spec_never_rolls_the_deployment_back() -> None:
    kube = CountingKube()
    deps = deps_for(kube, NOW)
    serve(kube, example("minimal.yaml"), deps)
    older = service(kube)
    kube.put(example("minimal.yaml", replicas=3))  # the user's edit
    reconcile(service(kube), deps=deps, logger=LOG)  # its spec pass: 3 replicas
    deps.services.forget(NAMESPACE, NAME)
    deps.services.note(older)  # the newer copy not in yet (an event on its way)
    deployments = len(kube.applied("Deployment", manager=c.FM_RENDERER))
    kube.gets.clear()

    reconcile_by_name(NAMESPACE, NAME, deps=deps, logger=LOG, seen=deployment_event())

    assert len(kube.applied("Deployment", manager=c.FM_RENDERER)) == deployments  # none sent
    assert deployment(kube)["spec"]["replicas"] == 3
    assert kube.gets[c.KIND] == 1  # the copy would have written a child: read, then passed
    assert service(kube)["status"]["observedGeneration"] == 2


def test_a_status_write_from_an_older_copy_is_refused_and_made_again_on_a_read() -> None:
    # the user's edit is not in the copy yet (its event, and the spec pass it starts, are on
    # their way) when a pod goes away: the write of Ready=False names the copy's version, is
    # refused, and the pass on the fresh read renders the edit too, after a read of its own
    kube = CountingKube()
    deps = deps_for(kube, NOW)
    serve(kube, example("minimal.yaml"), deps)
    kube.put(example("minimal.yaml", replicas=3))
    dep = deployment(kube)
    kube.set_status("apps/v1", "Deployment", NAMESPACE, NAME, {**dep["status"], "readyReplicas": 0})
    kube.gets.clear()

    reconcile_by_name(NAMESPACE, NAME, deps=deps, logger=LOG, seen=deployment_event())

    assert kube.gets[c.KIND] == 2  # after the refused write; after the refused child write
    assert deployment(kube)["spec"]["replicas"] == 3
    stored = service(kube)
    assert stored["status"]["observedGeneration"] == 2
    assert condition(stored, c.COND_READY)["status"] == "False"
    kept = deps.services.copy_of(NAMESPACE, NAME)
    assert kept is not None and kept["metadata"]["generation"] == 2  # the write's answer


def test_a_copy_of_a_service_being_deleted_is_not_passed() -> None:
    kube = CountingKube()
    deps = deps_for(kube, NOW)
    body = serve(kube, example("minimal.yaml"), deps)
    going = {**body, "metadata": {**body["metadata"], "deletionTimestamp": "2026-12-05T00:00:00Z"}}
    going["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1)
    deps.services.note(going)
    writes = kube.writes
    kube.gets.clear()

    reconcile_by_name(NAMESPACE, NAME, deps=deps, logger=LOG, seen=deployment_event())

    assert kube.writes == writes and kube.gets[c.KIND] == 0


def test_a_listed_copy_newer_than_the_kept_one_brings_an_edit_the_watch_missed() -> None:
    # the watch stalled (or kopf paused it on a standby): the resync's LIST has the edit
    kube = CountingKube()
    deps = deps_for(kube, NOW)
    serve(kube, example("minimal.yaml"), deps)
    kube.put(example("minimal.yaml", replicas=3))
    reconcile_by_name(NAMESPACE, NAME, deps=deps, logger=LOG)  # on the kept copy: no edit
    assert deployment(kube)["spec"]["replicas"] == 1

    reconcile_by_name(NAMESPACE, NAME, deps=deps, logger=LOG, listed=service(kube))

    assert deployment(kube)["spec"]["replicas"] == 3
    assert service(kube)["status"]["observedGeneration"] == 2
