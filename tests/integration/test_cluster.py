"""The local control plane is real: scheduling, extended resources, garbage collection, RBAC.

Each test here would pass against a mock API only if the mock re-implemented the scheduler, the
controller-manager and the authorizer; they guard the floor every other integration test stands on.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.support.kube import Cluster
from tests.support.wait import wait_until, watch_until

pytestmark = pytest.mark.integration

H100 = "NVIDIA-H100-80GB-HBM3"


def gpu_deployment(name: str, gpus: int, product: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.product": product},
                    "containers": [
                        {
                            "name": "c",
                            "image": "example.invalid/none:1",
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                        }
                    ],
                },
            },
        },
    }


def test_fleet_has_gpu_nodes_with_gfd_labels(core: client.CoreV1Api) -> None:
    nodes = {n.metadata.name: n for n in core.list_node(label_selector="type=kwok").items}
    products = sorted(n.metadata.labels["nvidia.com/gpu.product"] for n in nodes.values())
    assert products == [
        "NVIDIA-A100-SXM4-80GB",
        H100,
        H100,
        "NVIDIA-L4",
        "NVIDIA-L4",
    ]
    assert nodes["gpu-h100-0"].status.allocatable["nvidia.com/gpu"] == "8"
    assert all(
        any(c.type == "Ready" and c.status == "True" for c in n.status.conditions)
        for n in nodes.values()
    )


def test_gpu_deployment_lands_on_h100_and_runs(
    namespace: str, apps: client.AppsV1Api, core: client.CoreV1Api
) -> None:
    apps.create_namespaced_deployment(namespace, gpu_deployment("one-gpu", 1, H100))
    pod = watch_until(
        core.list_namespaced_pod,
        lambda p: p.status.phase == "Running" and p.spec.node_name is not None,
        namespace=namespace,
        label_selector="app=one-gpu",
        timeout=60,
        what="the GPU pod to be Running",
    )
    node = core.read_node(pod.spec.node_name)
    assert node.metadata.labels["nvidia.com/gpu.product"] == H100
    assert pod.spec.containers[0].resources.limits == {"nvidia.com/gpu": "1"}


def test_nine_gpus_do_not_fit_any_node(namespace: str, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "nine"},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "example.invalid/none:1",
                        "resources": {"limits": {"nvidia.com/gpu": "9"}},
                    }
                ]
            },
        },
    )

    def unschedulable(p: Any) -> bool:
        return any(
            c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
            for c in (p.status.conditions or [])
        )

    pod = watch_until(
        core.list_namespaced_pod,
        unschedulable,
        namespace=namespace,
        field_selector="metadata.name=nine",
        timeout=60,
        what="the 9-GPU pod to be reported Unschedulable",
    )
    assert pod.status.phase == "Pending"
    cond = next(c for c in pod.status.conditions if c.type == "PodScheduled")
    assert "Insufficient nvidia.com/gpu" in cond.message


def test_controller_manager_creates_and_garbage_collects(
    namespace: str, apps: client.AppsV1Api, core: client.CoreV1Api
) -> None:
    apps.create_namespaced_deployment(namespace, gpu_deployment("gc", 1, "NVIDIA-L4", replicas=2))
    wait_until(
        lambda: len(core.list_namespaced_pod(namespace, label_selector="app=gc").items) == 2,
        timeout=60,
        what="the Deployment controller to create 2 pods",
    )
    rs = apps.list_namespaced_replica_set(namespace, label_selector="app=gc").items
    assert len(rs) == 1 and rs[0].metadata.owner_references[0].kind == "Deployment"

    apps.delete_namespaced_deployment("gc", namespace, propagation_policy="Background")
    wait_until(
        lambda: (
            not apps.list_namespaced_replica_set(namespace, label_selector="app=gc").items
            and not core.list_namespaced_pod(namespace, label_selector="app=gc").items
        ),
        timeout=60,
        what="the garbage collector to delete the owned ReplicaSet and pods",
    )


def test_namespace_deletion_removes_its_objects(cluster: Cluster, core: client.CoreV1Api) -> None:
    name = "t-nsdel"
    core.create_namespace({"metadata": {"name": name}})
    core.create_namespaced_config_map(name, {"metadata": {"name": "cm"}, "data": {"k": "v"}})
    core.delete_namespace(name)

    def gone() -> bool:
        try:
            core.read_namespace(name)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_until(gone, timeout=90, what="the namespace controller to finish deleting t-nsdel")


def test_service_account_without_rbac_is_refused(
    cluster: Cluster, namespace: str, core: client.CoreV1Api
) -> None:
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "nobody"}})
    token = core.create_namespaced_service_account_token(
        "nobody", namespace, {"spec": {"expirationSeconds": 600}}
    ).status.token
    cfg = client.Configuration()
    cfg.host = cluster.api.configuration.host
    cfg.ssl_ca_cert = cluster.api.configuration.ssl_ca_cert
    cfg.verify_ssl = cluster.api.configuration.verify_ssl
    cfg.api_key = {"authorization": f"Bearer {token}"}
    as_sa = client.CoreV1Api(client.ApiClient(cfg))

    with pytest.raises(ApiException) as refused:
        as_sa.list_namespaced_pod(namespace)
    assert refused.value.status == 403
    assert f"system:serviceaccount:{namespace}:nobody" in refused.value.body

    # Granting the permission makes the same call pass: the refusal came from RBAC, not from auth.
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "pod-reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "pod-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "nobody", "namespace": namespace}],
        },
    )
    wait_until(
        lambda: as_sa.list_namespaced_pod(namespace) is not None,
        timeout=30,
        what="the RoleBinding to take effect",
    )


def test_monitoring_crds_are_served(cluster: Cluster) -> None:
    ext = client.ApiextensionsV1Api(cluster.api)
    names = {c.metadata.name for c in ext.list_custom_resource_definition().items}
    assert {
        "servicemonitors.monitoring.coreos.com",
        "podmonitors.monitoring.coreos.com",
        "prometheusrules.monitoring.coreos.com",
    } <= names


def _prom_query(url: str, expr: str) -> list[dict[str, Any]]:
    q = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=10) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def test_prometheus_scrapes_file_sd_targets(cluster: Cluster) -> None:
    """A target written into the file-SD directory is scraped with the labels it carries."""
    target = cluster.targets_dir / "itest-self.json"
    host = urllib.parse.urlparse(cluster.prometheus_url).netloc
    target.write_text(
        json.dumps([{"targets": [host], "labels": {"namespace": "itest", "pod": "self"}}])
    )
    try:
        series = wait_until(
            lambda: _prom_query(cluster.prometheus_url, 'up{job="vllm",namespace="itest"} == 1'),
            timeout=60,
            what="Prometheus to scrape the file-SD target",
        )
        assert series[0]["metric"]["pod"] == "self"
    finally:
        target.unlink()
