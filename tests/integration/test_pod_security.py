"""Every example's vLLM pod passes Pod Security "restricted", judged by the API server itself.

The namespace enforces the restricted level, so the PodSecurity admission plugin refuses a pod
that breaks any of its controls; the Deployment is applied too, where the plugin only warns, and
a warning fails the test as well. The control case, the same pod without its security contexts,
shows the namespace really enforces.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.support.kube import Cluster
from tests.support.wait import wait_until
from vllm_operator.api.errors import parse_vllmservice
from vllm_operator.config import OperatorConfig
from vllm_operator.render import render_all

pytestmark = pytest.mark.integration

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))
ENFORCE = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
    "pod-security.kubernetes.io/warn": "restricted",
}


@pytest.fixture
def restricted(core: client.CoreV1Api, namespace: str) -> str:
    core.patch_namespace(namespace, {"metadata": {"labels": ENFORCE}})
    return namespace


def _deployment(example: Path, namespace: str) -> dict[str, Any]:
    svc = parse_vllmservice(yaml.safe_load(example.read_text(encoding="utf-8")))
    (deployment,) = [
        m for m in render_all(svc, OperatorConfig()).manifests if m["kind"] == "Deployment"
    ]
    deployment["metadata"]["namespace"] = namespace
    return deployment


def _pod(deployment: dict[str, Any], name: str) -> dict[str, Any]:
    template = deployment["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**template["metadata"], "name": name},
        "spec": template["spec"],
    }


def _without_claims(pod: dict[str, Any]) -> dict[str, Any]:
    volumes = [
        {"name": v["name"], "emptyDir": {}} if "persistentVolumeClaim" in v else v
        for v in pod["spec"]["volumes"]
    ]
    return {**pod, "spec": {**pod["spec"], "volumes": volumes}}


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_example_pod_is_admitted_and_scheduled_in_a_restricted_namespace(
    cluster: Cluster, core: client.CoreV1Api, restricted: str, example: Path
) -> None:
    deployment = _deployment(example, restricted)
    applied = cluster.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(deployment), check=False
    )
    assert applied.returncode == 0, applied.stderr
    assert "PodSecurity" not in applied.stderr, applied.stderr
    core.create_namespaced_pod(restricted, _pod(deployment, f"{example.stem}-pod"))
    # Scheduled onto a kwok GPU node: the CPU and memory requests fit the nodes they select. The
    # copy swaps claims for emptyDirs: the examples' PersistentVolumeClaims do not exist here.
    pod = core.create_namespaced_pod(restricted, _without_claims(_pod(deployment, example.stem)))
    wait_until(
        lambda: any(
            c.type == "PodScheduled" and c.status == "True"
            for c in (core.read_namespaced_pod(pod.metadata.name, restricted).status.conditions)
            or []
        ),
        timeout=60,
        what=f"{example.stem}'s pod to be scheduled",
    )


def test_the_namespace_refuses_a_pod_without_the_security_contexts(
    core: client.CoreV1Api, restricted: str
) -> None:
    pod = _pod(_deployment(EXAMPLES[0], restricted), "unrestricted")
    del pod["spec"]["securityContext"]
    del pod["spec"]["containers"][0]["securityContext"]
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(restricted, pod)
    assert refused.value.status == 403
    body = str(refused.value.body)
    for control in ("allowPrivilegeEscalation", "capabilities", "runAsNonRoot", "seccompProfile"):
        assert control in body, body
