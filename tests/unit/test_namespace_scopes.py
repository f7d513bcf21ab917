"""`run -n a -n b` watches and lists those namespaces one by one; without -n, the whole cluster
(k8s/client.py namespace_scopes): the pod watches, the Deployment watches and the resync's
listing all follow it."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

from tests.component.handlers import deps_for, example
from tests.support.fake_kube import FakeKube
from vllm_operator.handlers.deployment_watch import DeploymentWatch, start_deployment_watches
from vllm_operator.handlers.periodic import list_services
from vllm_operator.handlers.pod_watch import PodWatches
from vllm_operator.k8s.client import namespace_scopes


def test_the_namespaces_given_or_the_whole_cluster() -> None:
    assert namespace_scopes(("a", "b")) == ("a", "b")
    assert namespace_scopes(()) == (None,)


def test_the_resync_lists_the_namespaces_given_or_all() -> None:
    kube = FakeKube()
    for ns in ("a", "b", "c"):
        svc = example("minimal.yaml")
        kube.put({**svc, "metadata": {**svc["metadata"], "namespace": ns}})
    deps = deps_for(kube, datetime(2026, 12, 5, tzinfo=UTC))

    def namespaces(listed: list[dict[str, Any]]) -> list[str]:
        return sorted(obj["metadata"]["namespace"] for obj in listed)

    assert namespaces(list_services(deps, ("a", "c"))) == ["a", "c"]
    assert namespaces(list_services(deps, ())) == ["a", "b", "c"]


def test_one_pod_watch_and_one_deployment_watch_per_scope(monkeypatch: Any) -> None:
    monkeypatch.setattr(DeploymentWatch, "start", lambda self: None)  # no thread, no API
    stop, kube = threading.Event(), FakeKube()
    for given, scopes in ((("a", "b"), {"a", "b"}), ((), {None})):
        assert set(PodWatches(kube, given, lambda key: None, stop).watches) == scopes  # type: ignore[arg-type]
        watches = start_deployment_watches(kube, given, lambda k, d: None, stop)  # type: ignore[arg-type]
        assert {w.namespace for w in watches} == scopes
