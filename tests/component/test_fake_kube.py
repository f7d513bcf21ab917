"""The recording fake behaves as the handlers need the API server to, and has KubeClient's shape."""

from __future__ import annotations

import inspect

import pytest
from kubernetes.client.exceptions import ApiException

from tests.support.fake_kube import FakeKube
from vllm_operator.k8s.client import Kube, KubeClient

DEP = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"}}


def dep(**spec: object) -> dict[str, object]:
    return {**DEP, "spec": dict(spec)}


def test_it_has_the_signatures_of_the_real_client() -> None:
    members = [m for m in vars(Kube) if not m.startswith("_")]
    assert {"get", "list", "apply", "create", "replace", "emit_event"} <= set(members)
    for name in members:
        if callable(getattr(Kube, name)):
            real, fake = getattr(KubeClient, name), getattr(FakeKube, name)
            assert inspect.signature(fake) == inspect.signature(real), name


def test_a_manager_owns_what_it_applied_last_and_others_keep_theirs() -> None:
    kube = FakeKube()
    kube.apply(dep(replicas=1, paused=False), field_manager="renderer")
    kube.apply(dep(replicas=3), field_manager="tuner")  # forced: the tuner takes replicas
    kube.apply(dep(paused=False), field_manager="renderer")  # no longer sets replicas
    stored = kube.get("apps/v1", "Deployment", "n", "d")
    assert stored is not None and stored["spec"] == {"replicas": 3, "paused": False}
    owners = {
        m["manager"]: set(m["fieldsV1"]["f:spec"]) for m in stored["metadata"]["managedFields"]
    }
    assert owners == {"renderer": {"f:paused"}, "tuner": {"f:replicas"}}
    kube.apply(dep(paused=True), field_manager="renderer")
    assert kube.get("apps/v1", "Deployment", "n", "d")["spec"] == {"replicas": 3, "paused": True}


def test_status_goes_through_its_subresource_only() -> None:
    kube = FakeKube()
    kube.apply({**dep(replicas=1), "status": {"x": 1}}, field_manager="a")
    assert "status" not in kube.get("apps/v1", "Deployment", "n", "d")
    kube.apply({**DEP, "status": {"conditions": [{"type": "A", "status": "True"}]}},
               field_manager="a", subresource="status")  # fmt: skip
    kube.apply({**DEP, "status": {"conditions": [{"type": "B", "status": "True"}]}},
               field_manager="b", subresource="status")  # fmt: skip
    stored = kube.get("apps/v1", "Deployment", "n", "d")
    assert stored is not None and [c["type"] for c in stored["status"]["conditions"]] == ["A", "B"]
    assert stored["spec"] == {"replicas": 1}


def test_a_refused_apply_raises_like_the_api_server_and_is_recorded() -> None:
    kube = FakeKube()
    kube.refuse("Deployment", 422, "spec.replicas: Invalid value")
    with pytest.raises(ApiException) as err:
        kube.apply(dep(replicas=-1), field_manager="renderer")
    assert err.value.status == 422 and "Invalid value" in str(err.value.body)
    assert [a.kind for a in kube.applies] == ["Deployment"] and kube.writes == 1
    assert kube.get("apps/v1", "Deployment", "n", "d") is None


def test_gets_and_lists_are_copies_served_from_the_store() -> None:
    kube = FakeKube()
    kube.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "n",
              "labels": {"app": "x"}}})  # fmt: skip
    kube.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p2", "namespace": "n"}})
    assert [p["metadata"]["name"] for p in kube.list("v1", "Pod", "n", "app=x")] == ["p1"]
    got = kube.get("v1", "Pod", "n", "p1")
    assert got is not None
    got["metadata"]["name"] = "changed"
    assert kube.get("v1", "Pod", "n", "p1")["metadata"]["name"] == "p1"
    assert kube.writes == 0  # put is the world's write, not a handler's
