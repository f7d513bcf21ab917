"""The chart on the local real control plane: validation, install, RBAC, upgrade, uninstall.

kwok runs no containers, so the operator pod the chart creates only pretends to run. The operator
itself runs here, as a process started with the installed pod's own command line and config file,
authenticated with a TokenRequest token of the chart's ServiceAccount: what that process manages
to do, the pod could do, and what it is refused, the pod would be refused.

test_chart_modes.py runs the operator from the image itself (e2e/image.sh builds or reuses it),
in namespaced scope and in HA mode; the fixtures live in conftest.py, the helpers in
cluster_helpers.py.

The cluster is shared with other test sessions whose operators may reconcile the same
VLLMServices, so the proof that the chart's RBAC is enough comes from the API server's audit log:
the writes made as the ServiceAccount, and that none of its requests was refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.chart.cluster_helpers import (
    assert_unchanged,
    can_i,
    gpu_catalog_sets,
    install_chart,
    installed_container,
    installed_operator,
    is_ready,
    load_example,
    permission_problems,
    reconcile_as_the_service_account,
    refused,
    release_name,
    sa_kubectl,
    sa_user,
    unique_gpu_type,
    upgrade_chart,
)
from tests.chart.support import (
    VALUES_DIR,
    Helm,
    documents,
)
from tests.support.audit import AuditLog, audit_log_path
from tests.support.kube import Cluster
from tests.support.vllmsvc import get
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration


# --- every rendered object against the real API server ----------------------------------------


@pytest.mark.parametrize("values", sorted(VALUES_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_rendered_object_passes_server_side_dry_run(
    cluster: Cluster,
    helm: Helm,
    kopf_crds: None,
    namespace: str,
    new_namespace: Any,
    values: Path,
) -> None:
    """Kubernetes 1.36's own validation (schemas, CRD schemas of the Prometheus Operator and kopf,
    strict field validation: unknown fields are errors), without creating anything."""
    watched = [new_namespace(), new_namespace()]
    sets = [f"watch.namespaces={{{','.join(watched)}}}"] if "namespaced" in values.name else []
    text = helm.template(
        release=release_name(), namespace=namespace, values=[values], sets=sets
    ).stdout
    docs = documents(text)
    proc = cluster.kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "--validate=strict",
        "--field-manager=chart-test",
        "-f",
        "-",
        input=text,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    applied = [line for line in proc.stdout.splitlines() if "(server dry run)" in line]
    assert len(applied) == len(docs), proc.stdout


def test_a_bad_object_fails_the_dry_run(cluster: Cluster, helm: Helm, namespace: str) -> None:
    """The dry run above can fail: an unknown field in the rendered Deployment is refused."""
    docs = documents(helm.template(release=release_name(), namespace=namespace).stdout)
    for doc in docs:
        if doc["kind"] == "Deployment":
            doc["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
    proc = cluster.kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "--validate=strict",
        "-f",
        "-",
        input=yaml.safe_dump_all(docs),
        check=False,
    )
    assert proc.returncode != 0
    assert "livenessProbes" in proc.stderr


# --- install, run as the ServiceAccount, upgrade, uninstall -----------------------------------


def test_install_run_upgrade_uninstall_cluster_scope(
    cluster: Cluster,
    helm: Helm,
    current_crds: None,
    namespace: str,
    new_namespace: Any,
    tmp_path: Path,
    apps: client.AppsV1Api,
) -> None:
    release, app_ns, other_ns = release_name(), new_namespace(), new_namespace()
    fullname = f"{release}-vllm-operator"
    audit = AuditLog(audit_log_path())

    gpu = unique_gpu_type()
    install_chart(helm, release, namespace, *gpu_catalog_sets(gpu))
    # CRDs from crds/ are there and served
    cluster.wait_established("vllmservices.serving.vllmop.io", "clusterkopfpeerings.kopf.dev")
    dep = apps.read_namespaced_deployment(fullname, namespace)
    assert dep.status.ready_replicas == 1  # kwok plays the kubelet
    for kind, name in [
        ("serviceaccount", fullname),
        ("configmap", fullname),
        ("clusterrole", fullname),
        ("clusterrolebinding", fullname),
    ]:
        cluster.kubectl("get", kind, name, "-n", namespace)

    user = sa_user(namespace, release)
    container = installed_container(cluster, "deployment", namespace, fullname)
    assert container["command"] == ["vllm-operator", "run"]
    assert "--all-namespaces" in container["args"]
    with installed_operator(cluster, namespace, release, tmp_path / "first", only=[app_ns]) as op:
        obj = load_example("three-layer-budgets.yaml", app_ns)
        pod_spec = reconcile_as_the_service_account(cluster, apps, obj, gpu, op, audit, user)
        assert pod_spec.node_selector == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    kubeconfig = Path(op.env["KUBECONFIG"])

    # cluster-wide reads the --all-namespaces pod makes
    for resource in ("vllmservices.serving.vllmop.io", "deployments.apps"):
        for verb in ("list", "watch"):
            assert can_i(cluster, kubeconfig, verb, resource, "--all-namespaces")
    assert can_i(cluster, kubeconfig, "watch", "customresourcedefinitions.apiextensions.k8s.io")
    # RBAC is minimal: what is not the operator's job is refused
    denied = sa_kubectl(cluster, kubeconfig, "get", "secrets", "-n", other_ns)
    assert denied.returncode != 0 and "Forbidden" in denied.stderr
    node = cluster.kubectl("get", "nodes", "-o", "name").stdout.split()[0]
    denied = sa_kubectl(cluster, kubeconfig, "delete", node, "--dry-run=server")
    assert denied.returncode != 0 and "Forbidden" in denied.stderr
    for args in [
        ("get", "secrets", "-n", namespace),
        # deployments: delete is granted, for a canary Deployment (docs/rollouts.md)
        ("delete", "services", "-n", app_ns),
        ("update", "deployments.apps", "-n", app_ns),
        ("delete", "vllmservices.serving.vllmop.io", "-n", app_ns),
        ("create", "pods", "-n", app_ns),
        ("update", "nodes"),
        ("create", "clusterroles.rbac.authorization.k8s.io"),
        ("impersonate", "serviceaccounts"),
        ("patch", "customresourcedefinitions.apiextensions.k8s.io"),
        ("patch", "clusterkopfpeerings.kopf.dev"),  # HA is off
        ("list", "namespaces"),  # not needed cluster-wide
    ]:
        assert not can_i(cluster, kubeconfig, *args), f"the operator may {' '.join(args)}"

    # upgrade: a config change is a new pod template (checksum), still one replica, Recreate
    before = apps.read_namespaced_deployment(fullname, namespace)
    upgrade_chart(
        helm,
        release,
        namespace,
        "--set",
        "config.prometheusUrl=http://prometheus.monitoring.svc:9090",
    )
    after = apps.read_namespaced_deployment(fullname, namespace)
    assert after.metadata.generation == before.metadata.generation + 1
    assert (
        after.spec.template.metadata.annotations["checksum/config"]
        != before.spec.template.metadata.annotations["checksum/config"]
    )
    assert after.spec.replicas == 1 and after.spec.strategy.type == "Recreate"
    cm = json.loads(cluster.kubectl("get", "cm", fullname, "-n", namespace, "-o", "json").stdout)
    assert "http://prometheus.monitoring.svc:9090" in cm["data"]["config.yaml"]
    history = json.loads(helm("history", release, "-n", namespace, "-o", "json").stdout)
    assert [h["status"] for h in history] == ["superseded", "deployed"]

    # uninstall: the operator's objects go; CRDs and VLLMServices stay
    name = obj["metadata"]["name"]
    kinds = ("vllmservice", "deployment", "service")
    kept = {kind: get(cluster, kind, app_ns, name) for kind in kinds}
    helm("uninstall", release, "-n", namespace, "--wait", "--timeout=2m")
    for kind, ns_args in [
        ("deployment", ["-n", namespace]),
        ("serviceaccount", ["-n", namespace]),
        ("configmap", ["-n", namespace]),
        ("clusterrole", []),
        ("clusterrolebinding", []),
    ]:
        gone = cluster.kubectl("get", kind, fullname, *ns_args, check=False)
        assert gone.returncode != 0 and "NotFound" in gone.stderr, (kind, gone.stdout)
    cluster.kubectl("get", "crd", "vllmservices.serving.vllmop.io", "clusterkopfpeerings.kopf.dev")
    # ... and the VLLMService and its children are the same objects, unchanged: no finalizer
    # waits for an operator, nothing deleted or rewrote them; the vLLM pods keep serving
    assert get(cluster, "vllmservice", app_ns, name)["metadata"].get("finalizers", []) == []
    assert_unchanged(cluster, app_ns, kept)

    # reinstalled, the operator takes the service up again with no spec write (nothing drifted,
    # so its first pass writes nothing at all) and manages it: a scaled Deployment is repaired
    install_chart(helm, release, namespace, *gpu_catalog_sets(gpu))
    again = AuditLog(audit_log_path())
    with installed_operator(cluster, namespace, release, tmp_path / "again", only=[app_ns]) as op:
        cluster.kubectl("scale", "deployment", name, "-n", app_ns, "--replicas=5")
        wait_until(
            lambda: get(cluster, "deployment", app_ns, name)["spec"] == kept["deployment"]["spec"],
            timeout=60,
            what="the reinstalled operator to repair the scaled Deployment",
        )
        wait_until(
            lambda: is_ready(get(cluster, "vllmservice", app_ns, name)),
            timeout=60,
            what="the service Ready again",
        )
    assert_unchanged(cluster, app_ns, {k: kept[k] for k in ("vllmservice", "service")})
    assert refused(again, user) == [] and permission_problems(op.log()) == []
    helm("uninstall", release, "-n", namespace, "--wait", "--timeout=2m")
