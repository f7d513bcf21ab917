"""The chart's operator in its other shapes on the local control plane: from the image, in
namespaced scope, and in HA mode with one active replica (the audit log proves the rights)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.chart.cluster_helpers import (
    can_i,
    gpu_catalog_sets,
    install_namespaced,
    installed_config,
    installed_container,
    installed_operator,
    load_example,
    permission_problems,
    reconcile_as_the_service_account,
    refused,
    release_name,
    sa_user,
    token_id,
    token_kubeconfig,
    unique_gpu_type,
    wait_ready,
    writes,
)
from tests.chart.image import ImageOperatorRun, image_engine
from tests.chart.objects import create
from tests.chart.support import (
    CHART,
    Helm,
    OperatorRun,
)
from tests.support.audit import AuditLog, audit_log_path
from tests.support.kube import Cluster
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration


def test_the_image_runs_the_operator_as_the_chart_does(
    cluster: Cluster,
    helm: Helm,
    current_crds: None,
    namespace: str,
    new_namespace: Any,
    tmp_path: Path,
    apps: client.AppsV1Api,
    operator_image: str,
) -> None:
    """The chart's pod, run from the image: it reconciles the example to Ready as the
    ServiceAccount, on a read-only root as UID 65532, with nothing refused."""
    release, app_ns, gpu = release_name(), new_namespace(), unique_gpu_type()
    fullname = f"{release}-vllm-operator"
    audit = AuditLog(audit_log_path())
    install_namespaced(helm, release, namespace, [app_ns], gpu)
    spec = installed_container(cluster, "deployment", namespace, fullname)
    assert spec["command"] == ["vllm-operator", "run"]
    assert spec["args"][0] == f"--namespace={app_ns}"
    sa = f"{release}-vllm-operator"
    token = cluster.kubectl("create", "token", sa, "-n", namespace, "--duration=1h").stdout.strip()
    op = ImageOperatorRun(
        spec,
        engine=image_engine(),
        image=operator_image,
        kubeconfig=cluster.kubeconfig,
        token=token,
        config_file=installed_config(cluster, namespace, fullname, tmp_path),
        workdir=tmp_path,
        pod_id=f"{fullname}-0",
        pod_namespace=namespace,
    )
    op.start()
    try:
        wait_until(op.healthz, timeout=90, what="kopf's /healthz in the image")
        obj = load_example("three-layer-budgets.yaml", app_ns)
        user = sa_user(namespace, release)
        reconcile_as_the_service_account(cluster, apps, obj, gpu, op, audit, user)
    finally:
        op.stop()
    helm("uninstall", release, "-n", namespace, "--wait", "--timeout=2m")


def test_namespaced_scope_operator_manages_only_its_namespaces(
    cluster: Cluster,
    helm: Helm,
    current_crds: None,
    namespace: str,
    new_namespace: Any,
    tmp_path: Path,
    apps: client.AppsV1Api,
) -> None:
    release, watched, unwatched = release_name(), new_namespace(), new_namespace()
    also_watched, gpu = new_namespace(), unique_gpu_type()
    fullname = f"{release}-vllm-operator"
    audit = AuditLog(audit_log_path())
    install_namespaced(helm, release, namespace, [watched, also_watched], gpu)
    user = sa_user(namespace, release)
    # exactly the installed pod's command line: -n per watched namespace
    container = installed_container(cluster, "deployment", namespace, fullname)
    assert container["args"][:2] == [f"--namespace={watched}", f"--namespace={also_watched}"]
    with installed_operator(cluster, namespace, release, tmp_path) as op:
        mine = load_example("minimal.yaml", watched)
        mine["spec"]["gpu"]["type"] = gpu
        wait_ready(cluster, create(cluster, mine), op)
        theirs = load_example("minimal.yaml", unwatched)
        theirs["spec"]["gpu"]["type"] = gpu
        create(cluster, theirs)
        # the Ready Event is posted from the events pool after the status write, so it is
        # waited for with the writes, not read in the same breath as them
        expected = {
            ("patch", "deployments", "2xx"),
            ("patch", "vllmservices/status", "2xx"),
            ("create", "events", "2xx"),
        }
        wait_until(
            lambda: expected <= writes(audit, user, watched),
            timeout=30,
            what="the ServiceAccount's writes in the watched namespace",
        )
        assert refused(audit, user) == []
        assert permission_problems(op.log()) == []
        # it never wrote anything in the namespace it does not watch
        assert writes(audit, user, unwatched) == set()
    kubeconfig = Path(op.env["KUBECONFIG"])
    for verb, resource in [
        ("list", "deployments.apps"),
        ("patch", "vllmservices.serving.vllmop.io"),
    ]:
        assert can_i(cluster, kubeconfig, verb, resource, "-n", watched)
        assert can_i(cluster, kubeconfig, verb, resource, "-n", also_watched)
        assert not can_i(cluster, kubeconfig, verb, resource, "-n", unwatched)
        assert not can_i(cluster, kubeconfig, verb, resource, "--all-namespaces")
    assert can_i(cluster, kubeconfig, "list", "customresourcedefinitions.apiextensions.k8s.io")
    assert can_i(cluster, kubeconfig, "list", "namespaces")  # kopf's namespaced start-up
    assert not can_i(cluster, kubeconfig, "get", "secrets", "-n", watched)
    helm("uninstall", release, "-n", namespace, "--wait", "--timeout=2m")
    for ns in (watched, also_watched):
        gone = cluster.kubectl("get", "role", fullname, "-n", ns, check=False)
        assert "NotFound" in gone.stderr


def test_ha_mode_runs_exactly_one_active_operator(
    cluster: Cluster,
    helm: Helm,
    current_crds: None,
    kopf_crds: None,
    namespace: str,
    new_namespace: Any,
    tmp_path: Path,
) -> None:
    """Two replicas with the StatefulSet's command lines: ordinal 0 reconciles, ordinal 1 waits
    paused (kopf starts a peering operator paused until it has seen the peering), and takes over
    when ordinal 0 stops."""
    release, app_ns, gpu = release_name(), new_namespace(), unique_gpu_type()
    fullname = f"{release}-vllm-operator"
    helm(
        "install",
        release,
        str(CHART),
        "-n",
        namespace,
        "--wait",
        "--timeout=3m",
        "--set",
        "ha.enabled=true",
        "--set",
        "watch.scope=Namespaced",
        "--set",
        f"watch.namespaces={{{app_ns}}}",
        *gpu_catalog_sets(gpu),
    )
    container = installed_container(cluster, "statefulset", namespace, fullname)
    config = installed_config(cluster, namespace, fullname, tmp_path)
    audit = AuditLog(audit_log_path())
    # one token each (as each pod has its own), so the audit log tells their writes apart
    kubeconfigs = [token_kubeconfig(cluster, namespace, release, tmp_path / f"{i}") for i in (0, 1)]
    ops = [
        OperatorRun(
            container,
            kubeconfig=kubeconfigs[i],
            config_file=config,
            log_path=tmp_path / f"operator-{i}.log",
            pod_id=f"{fullname}-{i}",
            pod_namespace=namespace,
        )
        for i in range(2)
    ]

    def peers() -> dict[str, Any]:
        obj = json.loads(
            cluster.kubectl("get", "kopfpeering", fullname, "-n", app_ns, "-o", "json").stdout
        )
        return {k: v for k, v in (obj.get("status") or {}).items() if v}

    def writes_by(i: int) -> list[str]:
        jti = token_id(kubeconfigs[i])
        return [
            f"{e['verb']} {e['requestURI']}"
            for e in audit.events(sa_user(namespace, release))
            if jti in json.dumps(e["user"].get("extra", {}))
            and e.get("objectRef", {}).get("resource") != "kopfpeerings"
        ]

    try:
        ops[0].start()  # OrderedReady: ordinal 0 first
        wait_until(ops[0].healthz, timeout=60, what="ordinal 0's /healthz")
        wait_until(lambda: f"{fullname}-0" in peers(), timeout=60, what="ordinal 0's keep-alive")
        ops[1].start()
        wait_until(ops[1].healthz, timeout=60, what="ordinal 1's /healthz")
        wait_until(lambda: len(peers()) == 2, timeout=60, what="ordinal 1's keep-alive")
        assert {k: v["priority"] for k, v in peers().items()} == {
            f"{fullname}-0": 100,
            f"{fullname}-1": 99,
        }
        first = load_example("minimal.yaml", app_ns)
        first["metadata"]["name"] = "first"
        first["spec"]["gpu"]["type"] = gpu
        wait_ready(cluster, create(cluster, first), ops[0])
        # ordinal 0 did the work; ordinal 1 stood by and wrote nothing but its keep-alives
        wait_until(lambda: writes_by(0), timeout=30, what="ordinal 0's writes in the audit log")
        assert writes_by(1) == []

        ops[0].stop()  # a clean stop removes its keep-alive: ordinal 1 resumes at once
        wait_until(lambda: len(peers()) == 1, timeout=60, what="ordinal 0 to leave the peering")
        second = load_example("minimal.yaml", app_ns)
        second["metadata"]["name"] = "second"
        second["spec"]["gpu"]["type"] = gpu
        wait_ready(cluster, create(cluster, second), ops[1])
        assert any("/second" in w for w in writes_by(1)), writes_by(1)
        for op in ops:
            assert permission_problems(op.log()) == [], op.log()[-3000:]
    finally:
        for op in ops:
            op.stop()
    helm("uninstall", release, "-n", namespace, "--wait", "--timeout=2m")
