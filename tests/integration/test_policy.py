"""The operator's input policy and the per-VLLMService NetworkPolicy, on the real API server."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from tests.integration.test_operator import apply, load_example, wait_degraded, wait_ready
from tests.support.kube import Cluster
from tests.support.operator import OperatorProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration


def _network_policy(net: client.NetworkingV1Api, ns: str, name: str) -> Any:
    found = net.list_namespaced_network_policy(ns, field_selector=f"metadata.name={name}").items
    return found[0] if found else None


def test_network_policy_admits_the_listed_namespaces_and_goes_with_the_spec_field(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str, apps: client.AppsV1Api
) -> None:
    net = client.NetworkingV1Api(cluster.api)
    obj = load_example("secured-api.yaml", namespace)
    obj["spec"]["networkPolicy"]["fromNamespaces"] = [namespace, "monitoring"]
    name = obj["metadata"]["name"]
    apply(cluster, obj)
    wait_ready(cluster, namespace, name, operator_process)

    policy = _network_policy(net, namespace, name)
    assert policy is not None
    assert policy.spec.pod_selector.match_labels == {"serving.vllmop.io/vllmservice": name}
    (rule,) = policy.spec.ingress
    (peer,) = rule._from
    (expr,) = peer.namespace_selector.match_expressions
    assert (expr.key, expr.operator) == ("kubernetes.io/metadata.name", "In")
    assert sorted(expr.values) == sorted([namespace, "monitoring"])
    assert [(p.port, p.protocol) for p in rule.ports] == [(8000, "TCP")]
    assert policy.metadata.owner_references[0].kind == "VLLMService"
    # the API key comes from the Secret, never as a literal
    env = apps.read_namespaced_deployment(name, namespace).spec.template.spec.containers[0].env
    key = next(e for e in env if e.name == "VLLM_API_KEY")
    assert key.value is None and key.value_from.secret_key_ref.name == "chat-api-key"

    del obj["spec"]["networkPolicy"]
    apply(cluster, obj)
    wait_until(
        lambda: _network_policy(net, namespace, name) is None,
        timeout=60,
        what="the NetworkPolicy to go with spec.networkPolicy",
    )
    wait_ready(cluster, namespace, name, operator_process)


def test_a_denied_flag_is_reported_and_nothing_is_deployed(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str, apps: client.AppsV1Api
) -> None:
    obj = load_example("minimal.yaml", namespace)
    obj["spec"]["engine"] = {"extraArgs": ["--enforce-eager", "--trust_remote"]}
    name = obj["metadata"]["name"]
    # The CRD cannot know the operator's policy, so the API server stores the object, unless a
    # chart test's ValidatingAdmissionPolicy on this shared cluster is still being torn down.
    wait_until(
        lambda: apply(cluster, obj, check=False).returncode == 0,
        timeout=60,
        what="the API server to store a VLLMService with a denied flag (no admission policy)",
    )

    cond = wait_degraded(
        cluster, namespace, name, timeout=60, what="Degraded=True for a flag the policy denies"
    )
    assert cond["reason"] == "PolicyDenied"
    assert cond["message"].startswith(
        'spec.engine.extraArgs[1]: "--trust_remote" is vLLM\'s --trust-remote-code'
    )
    assert apps.list_namespaced_deployment(namespace).items == []
