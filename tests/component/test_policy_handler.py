"""The reconcile handler with the operator's policy and the optional NetworkPolicy child."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.component.handlers import LOG, NAME, NAMESPACE, condition, example, serve, service
from tests.support.fake_kube import FakeKube
from vllm_operator import constants as c
from vllm_operator.api.policy import PolicyConfig
from vllm_operator.config import OperatorConfig
from vllm_operator.handlers.deps import Deps
from vllm_operator.handlers.reconcile import reconcile

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _deps(kube: FakeKube, policy: PolicyConfig | None = None) -> Deps:
    cfg = OperatorConfig(policy=policy or PolicyConfig())
    return Deps(cfg=cfg, kube=kube, prometheus=None, clock=lambda: NOW)


def test_a_denied_flag_is_degraded_policy_denied_and_nothing_is_applied() -> None:
    kube = FakeKube()
    kube.put(example("minimal.yaml", engine={"extraArgs": ["--trust-remote-code"]}))
    reconcile(service(kube), deps=_deps(kube), logger=LOG)
    assert [a.kind for a in kube.applies if a.kind != c.KIND] == []
    degraded = condition(service(kube), c.COND_DEGRADED)
    assert (degraded["status"], degraded["reason"]) == ("True", c.REASON_POLICY_DENIED)
    assert degraded["message"].startswith('spec.engine.extraArgs[0]: "--trust-remote-code"')
    assert "policy.allowedFlags" in degraded["message"]


def test_the_same_spec_is_served_where_the_policy_allows_the_flag() -> None:
    kube = FakeKube()
    deps = _deps(kube, PolicyConfig(allowed_flags=["--trust-remote-code"]))
    body = serve(kube, example("minimal.yaml", engine={"extraArgs": ["--trust-remote-code"]}), deps)
    assert condition(body, c.COND_READY)["status"] == "True"
    assert body["status"]["effective"]["args"][-1] == "--trust-remote-code"


def test_an_image_outside_the_allow_list_is_refused() -> None:
    kube = FakeKube()
    policy = PolicyConfig(allowed_images=["vllm/vllm-openai:*"])
    kube.put(example("minimal.yaml", image="evil.example/miner:latest"))
    reconcile(service(kube), deps=_deps(kube, policy), logger=LOG)
    degraded = condition(service(kube), c.COND_DEGRADED)
    assert degraded["reason"] == c.REASON_POLICY_DENIED
    assert degraded["message"].startswith("spec.image: 'evil.example/miner:latest' is not allowed")


def test_the_network_policy_is_created_and_deleted_with_its_spec_field() -> None:
    kube = FakeKube()
    deps = _deps(kube)
    body = serve(kube, example("secured-api.yaml"), deps)
    policy = kube.get("networking.k8s.io/v1", "NetworkPolicy", NAMESPACE, NAME)
    assert policy is not None
    assert policy["metadata"]["ownerReferences"][0]["uid"] == body["metadata"]["uid"]

    writes = kube.writes
    reconcile(service(kube), deps=deps, logger=LOG)
    assert kube.writes == writes and kube.deletes == []  # nothing to prune: nothing written

    edited = service(kube)
    del edited["spec"]["networkPolicy"]
    kube.put(edited)
    reconcile(service(kube), deps=deps, logger=LOG)
    assert kube.deletes == [("NetworkPolicy", NAMESPACE, NAME)]
    assert kube.get("networking.k8s.io/v1", "NetworkPolicy", NAMESPACE, NAME) is None
    assert kube.get("apps/v1", "Deployment", NAMESPACE, NAME) is not None


def test_a_child_of_the_same_name_that_someone_else_owns_is_not_deleted() -> None:
    kube = FakeKube()
    deps = _deps(kube)
    serve(kube, example("minimal.yaml"), deps)
    theirs = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "uid": "theirs"},
        "spec": {"podSelector": {}},
    }
    kube.put(theirs)
    reconcile(service(kube), deps=deps, logger=LOG)
    assert kube.deletes == []
