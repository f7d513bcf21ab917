"""Upgrading and moving the chart's operator on the local control plane, as docs/user-guide.md
("Upgrade and uninstall") tells users to: a new CRD applied before `helm upgrade` (Helm never
upgrades crds/), and a switch between cluster and namespaced scope in both directions.

What uninstall keeps, and a reinstall adopting it, is in test_chart_cluster.py."""

from __future__ import annotations

import json
import shutil
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
    install_namespaced,
    installed_operator,
    is_ready,
    load_example,
    patch_spec,
    release_name,
    sa_user,
    unique_gpu_type,
    upgrade_chart,
    wait_ready,
    writes,
)
from tests.chart.objects import create
from tests.chart.support import CHART, Helm
from tests.support.audit import AuditLog, audit_log_path
from tests.support.kube import Cluster
from tests.support.vllmsvc import get
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration

CRD = CHART / "crds" / "serving.vllmop.io_vllmservices.yaml"


def older_crd() -> dict[str, Any]:
    """The chart's CRD as an older chart shipped it: no spec.compileCache, no Reason column."""
    crd: dict[str, Any] = yaml.safe_load(CRD.read_text())
    (version,) = crd["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    del spec["properties"]["compileCache"]
    assert "compileCache" not in json.dumps(spec.get("x-kubernetes-validations", []))
    columns = version["additionalPrinterColumns"]
    version["additionalPrinterColumns"] = [c for c in columns if c["name"] != "Reason"]
    return crd


def older_chart(workdir: Path) -> Path:
    chart = workdir / "vllm-operator"
    shutil.copytree(CHART, chart)
    (chart / "crds" / CRD.name).write_text(yaml.safe_dump(older_crd()))
    return chart


def explains(cluster: Cluster, field: str) -> bool:
    return cluster.kubectl("explain", f"vllmservices.{field}", check=False).returncode == 0


def test_the_documented_crd_upgrade_serves_the_new_schema_and_keeps_services(
    cluster: Cluster,
    helm: Helm,
    current_crds: None,
    namespace: str,
    new_namespace: Any,
    tmp_path: Path,
) -> None:
    release, app_ns, gpu = release_name(), new_namespace(), unique_gpu_type()
    old = older_chart(tmp_path)
    # The older chart's CRD is the one served. This cluster has the current one already (and
    # helm would leave an existing CRD as it is), so it is replaced in full first: an apply
    # would keep the fields other managers still own.
    cluster.kubectl("replace", "-f", str(old / "crds" / CRD.name))
    try:
        install_namespaced(helm, release, namespace, [app_ns], gpu, chart=old)
        wait_until(
            lambda: not explains(cluster, "spec.compileCache"),
            timeout=60,
            what="the older CRD's schema (no spec.compileCache) to be published",
        )
        obj = load_example("minimal.yaml", app_ns)
        obj["spec"]["gpu"]["type"] = gpu
        obj["spec"]["compileCache"] = {"enabled": True}
        with installed_operator(cluster, namespace, release, tmp_path / "old") as op:
            svc = wait_ready(cluster, create(cluster, obj), op)
        assert "compileCache" not in svc["spec"]  # the older schema pruned it
        name = svc["metadata"]["name"]
        kept = {kind: get(cluster, kind, app_ns, name) for kind in ("vllmservice", "deployment")}
        (row,) = cluster.table("vllmsvc", name, "-n", app_ns)
        assert "REASON" not in row

        # the upgrade, as docs/user-guide.md says: the chart's CRDs first, then helm upgrade
        cluster.kubectl(
            "apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds") + "/"
        )
        upgrade_chart(helm, release, namespace, "--reuse-values")
        wait_until(
            lambda: explains(cluster, "spec.compileCache.pvcName"),
            timeout=60,
            what="kubectl explain to show the new field spec.compileCache",
        )
        (row,) = cluster.table("vllmsvc", name, "-n", app_ns)
        assert "REASON" in row  # the new printer column
        # the existing service is untouched by the new schema, and the new operator keeps it
        assert_unchanged(cluster, app_ns, kept)
        with installed_operator(cluster, namespace, release, tmp_path / "new") as op:
            # the field the older schema pruned is kept now, and rendered
            edited = patch_spec(cluster, app_ns, name, {"compileCache": {"enabled": True}})
            assert edited["spec"]["compileCache"] == {"enabled": True}
            generation = kept["vllmservice"]["metadata"]["generation"]
            assert edited["metadata"]["generation"] == generation + 1
            wait_ready(cluster, edited, op)
        volumes = get(cluster, "deployment", app_ns, name)["spec"]["template"]["spec"]["volumes"]
        assert {"name": "compile-cache", "emptyDir": {}} in volumes, volumes
    finally:
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    helm("uninstall", release, "-n", namespace, "--wait", "--timeout=2m")


def test_moving_between_cluster_and_namespaced_scope(
    cluster: Cluster,
    helm: Helm,
    current_crds: None,
    namespace: str,
    new_namespace: Any,
    tmp_path: Path,
    apps: client.AppsV1Api,
) -> None:
    """Cluster -> Namespaced (one namespace listed) -> Cluster with `helm upgrade --reuse-values`:
    the service in the listed namespace is reconciled throughout; the one in the namespace no
    longer watched keeps running unmanaged, its edit waits, and is rendered once it is watched."""
    release, listed, unlisted, gpu = (
        release_name(),
        new_namespace(),
        new_namespace(),
        unique_gpu_type(),
    )
    user = sa_user(namespace, release)
    install_chart(helm, release, namespace, *gpu_catalog_sets(gpu))
    both = [listed, unlisted]
    with installed_operator(cluster, namespace, release, tmp_path / "cluster", only=both) as op:
        for ns in both:
            obj = load_example("minimal.yaml", ns)
            obj["spec"]["gpu"]["type"] = gpu
            wait_ready(cluster, create(cluster, obj), op)
    name = obj["metadata"]["name"]

    def upgrade(*sets: str) -> None:
        upgrade_chart(
            helm, release, namespace, "--reuse-values", *(a for s in sets for a in ("--set", s))
        )

    def replicas(ns: str) -> int:
        return int(apps.read_namespaced_deployment(name, ns).spec.replicas)

    upgrade("watch.scope=Namespaced", f"watch.namespaces={{{listed}}}")
    with installed_operator(cluster, namespace, release, tmp_path / "namespaced") as op:
        kubeconfig = Path(op.env["KUBECONFIG"])
        assert can_i(cluster, kubeconfig, "patch", "deployments.apps", "-n", listed)
        assert not can_i(cluster, kubeconfig, "patch", "deployments.apps", "-n", unlisted)
        audit = AuditLog(audit_log_path())
        waiting = patch_spec(cluster, unlisted, name, {"replicas": 2})
        mine = patch_spec(cluster, listed, name, {"replicas": 2})
        wait_ready(cluster, mine, op)
        assert replicas(listed) == 2
        assert writes(audit, user, unlisted) == set()
    # the unwatched service runs on as it was: its edit is not rendered, its status is old
    left = get(cluster, "vllmservice", unlisted, name)
    assert replicas(unlisted) == 1
    assert left["status"]["observedGeneration"] == waiting["metadata"]["generation"] - 1

    upgrade("watch.scope=Cluster")
    with installed_operator(cluster, namespace, release, tmp_path / "back", only=both) as op:
        wait_ready(cluster, waiting, op)  # watched again: the waiting edit is rendered
        assert replicas(unlisted) == 2
        assert is_ready(get(cluster, "vllmservice", listed, name))
    helm("uninstall", release, "-n", namespace, "--wait", "--timeout=2m")
