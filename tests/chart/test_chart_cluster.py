"""The chart on the local real control plane: validation, install, RBAC, upgrade, uninstall.

kwok runs no containers, so the operator pod the chart creates only pretends to run. The operator
itself runs here, as a process started with the installed pod's own command line and config file,
authenticated with a TokenRequest token of the chart's ServiceAccount: what that process manages
to do, the pod could do, and what it is refused, the pod would be refused.

One test runs the operator from the image itself (e2e/image.sh builds or reuses it), with the pod's
command line, env, config path and in-cluster ServiceAccount credentials.

The cluster is shared with other test sessions whose operators may reconcile the same
VLLMServices, so the proof that the chart's RBAC is enough comes from the API server's audit log:
the writes made as the ServiceAccount, and that none of its requests was refused.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.chart.image import ImageOperatorRun, image_engine
from tests.chart.objects import create, versions_until
from tests.chart.support import (
    CHART,
    VALUES_DIR,
    AuditLog,
    Helm,
    OperatorRun,
    audit_log_path,
    documents,
    write_token_kubeconfig,
)
from tests.support.kube import ROOT, Cluster
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration

CRD_FILES = sorted((CHART / "crds").glob("*.yaml"))


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture
def helm(cluster: Cluster, helm_bin: Helm) -> Helm:
    return Helm(helm_bin.binary, kubeconfig=cluster.kubeconfig)


@pytest.fixture
def new_namespace(cluster: Cluster) -> Iterator[Any]:
    """Factory of extra fresh namespaces (deleted afterwards), like the `namespace` fixture."""
    core = client.CoreV1Api(cluster.api)
    made: list[str] = []

    def make() -> str:
        name = f"t-{uuid.uuid4().hex[:10]}"
        core.create_namespace({"metadata": {"name": name, "labels": {"vllmop.test": "true"}}})
        made.append(name)
        return name

    yield make
    for name in made:
        core.delete_namespace(name, propagation_policy="Background")


@pytest.fixture
def current_crds(cluster: Cluster) -> None:
    """The VLLMService CRD of this tree, applied as the integration tier applies it.

    helm v4 server-side-applies crds/ on install; on this shared cluster the CRD may have been
    applied from an older tree by another session, and a field that differs would make helm's
    apply conflict. With the current CRD in place helm's apply agrees on every field; the
    forced apply also takes back fields an older helm install of another session may own."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    cluster.kubectl(
        "wait", "--for=condition=Established", "crd/vllmservices.serving.vllmop.io", "--timeout=60s"
    )


@pytest.fixture(scope="module")
def kopf_crds(cluster: Cluster) -> None:
    """The chart's kopf.dev peering CRDs (cluster-scoped, inert unless an operator peers)."""
    cluster.kubectl("apply", "--server-side", "-f", str(CHART / "crds" / "kopf.dev_peerings.yaml"))
    cluster.kubectl(
        "wait",
        "--for=condition=Established",
        "crd/kopfpeerings.kopf.dev",
        "crd/clusterkopfpeerings.kopf.dev",
        "--timeout=60s",
    )


def release_name() -> str:
    return f"op-{uuid.uuid4().hex[:8]}"


def sa_user(namespace: str, release: str) -> str:
    return f"system:serviceaccount:{namespace}:{release}-vllm-operator"


def token_kubeconfig(cluster: Cluster, namespace: str, release: str, tmp_path: Path) -> Path:
    """A kubeconfig with a TokenRequest token of the chart's ServiceAccount (what a pod gets)."""
    sa = f"{release}-vllm-operator"
    token = cluster.kubectl("create", "token", sa, "-n", namespace, "--duration=1h").stdout.strip()
    tmp_path.mkdir(parents=True, exist_ok=True)
    return write_token_kubeconfig(cluster.kubeconfig, token, tmp_path / f"{sa}.kubeconfig")


def token_id(kubeconfig: Path) -> str:
    """The token's JTI, which the audit log records as the request's credential id."""
    import base64

    token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return str(claims["jti"])


def installed_container(cluster: Cluster, kind: str, namespace: str, name: str) -> dict[str, Any]:
    obj = json.loads(cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json").stdout)
    container: dict[str, Any] = obj["spec"]["template"]["spec"]["containers"][0]
    return container


def installed_config(cluster: Cluster, namespace: str, name: str, tmp_path: Path) -> Path:
    cm = json.loads(cluster.kubectl("get", "configmap", name, "-n", namespace, "-o", "json").stdout)
    path = tmp_path / f"{name}-config.yaml"
    path.write_text(cm["data"]["config.yaml"])
    return path


def load_example(name: str, namespace: str) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((ROOT / "examples" / name).read_text())
    obj["metadata"]["namespace"] = namespace
    return obj


# A GPU type only the operators under test know (the chart's config.gpuCatalog adds it, on the
# H100 nodes): any other operator on this shared cluster, or the integration tier's, reports its
# VLLMServices as UnknownGPUType and renders nothing, so every child is the work of ours.
def gpu_catalog_sets(gpu_type: str) -> list[str]:
    key = f"config.gpuCatalog.{gpu_type}"
    return [
        "--set",
        f"{key}.resourceName=nvidia.com/gpu",
        "--set-string",
        f"{key}.nodeLabels.nvidia\\.com/gpu\\.product=NVIDIA-H100-80GB-HBM3",
        "--set",
        f"{key}.memoryGiB=80",
        "--set",
        f"{key}.memoryBandwidthGBps=3350",
    ]


def install_namespaced(
    helm: Helm, release: str, namespace: str, watched: list[str], gpu: str
) -> None:
    """The chart in namespaced mode, watching `watched`, with the test's own GPU type."""
    install_chart(
        helm,
        release,
        namespace,
        "-f",
        str(VALUES_DIR / "namespaced.yaml"),
        "--set",
        f"watch.namespaces={{{','.join(watched)}}}",
        *gpu_catalog_sets(gpu),
    )


def install_chart(helm: Helm, release: str, namespace: str, *args: str) -> None:
    helm("install", release, str(CHART), "-n", namespace, "--wait", "--timeout=3m", *args)


def unique_gpu_type() -> str:
    return f"TEST-{uuid.uuid4().hex[:8].upper()}"


def is_ready(obj: dict[str, Any]) -> bool:
    conds = obj.get("status", {}).get("conditions") or []
    ok = any(c["type"] == "Ready" and c["status"] == "True" for c in conds)
    return ok and obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]


def wait_ready(
    cluster: Cluster, created: dict[str, Any], op: OperatorRun, timeout: int = 90
) -> dict[str, Any]:
    """The first version of the object that is Ready for its generation."""
    return versions_until(cluster, created, is_ready, op, timeout)[-1]


def writes(audit: AuditLog, user: str, namespace: str) -> set[tuple[str, str, str]]:
    """(verb, resource[/subresource], response code class) of the user's writes in a namespace."""
    out = set()
    for e in audit.events(user):
        ref = e.get("objectRef", {})
        if ref.get("namespace") != namespace:
            continue
        resource = ref.get("resource", "") + (
            f"/{ref['subresource']}" if ref.get("subresource") else ""
        )
        out.add((e["verb"], resource, str(e["responseStatus"]["code"])[0] + "xx"))
    return out


def refused(audit: AuditLog, user: str) -> list[str]:
    return [
        f"{e['verb']} {e['requestURI']}: {e['responseStatus']['code']}"
        for e in audit.events(user)
        if e["responseStatus"]["code"] == 403
        or e.get("annotations", {}).get("authorization.k8s.io/decision") == "forbid"
    ]


PERMISSION_ERRORS = ("Forbidden", "forbidden", "403", "Not enough permissions")


def permission_problems(log: str, allowed: tuple[str, ...] = ()) -> list[str]:
    return [
        line
        for line in log.splitlines()
        if any(p in line for p in PERMISSION_ERRORS) and not any(a in line for a in allowed)
    ]


def reconcile_as_the_service_account(
    cluster: Cluster,
    apps: client.AppsV1Api,
    obj: dict[str, Any],
    gpu: str,
    op: OperatorRun,
    audit: AuditLog,
    user: str,
) -> Any:
    """Create `obj` (on the test's GPU type) and wait until `op` made it Ready; the RBAC was
    enough: the ServiceAccount itself created the children, wrote status and posted Events, and
    nothing it asked was refused. Returns the Deployment's pod spec."""
    namespace = obj["metadata"]["namespace"]
    obj["spec"]["gpu"]["type"] = gpu
    svc = wait_ready(cluster, create(cluster, obj), op)
    dep = apps.read_namespaced_deployment(obj["metadata"]["name"], namespace)
    assert svc["status"]["effective"]["args"] == dep.spec.template.spec.containers[0].args
    expected = {
        ("patch", "deployments", "2xx"),
        ("patch", "services", "2xx"),
        ("patch", "vllmservices/status", "2xx"),
        ("create", "events", "2xx"),
    }
    got = wait_until(
        lambda: expected <= writes(audit, user, namespace) and writes(audit, user, namespace),
        timeout=30,
        what="the ServiceAccount's writes in the audit log",
    )
    assert expected <= got
    assert refused(audit, user) == []
    assert permission_problems(op.log()) == []
    return dep.spec.template.spec


def can_i(cluster: Cluster, kubeconfig: Path, *args: str) -> bool:
    proc = cluster.kubectl("--kubeconfig", str(kubeconfig), "auth", "can-i", *args, check=False)
    return proc.stdout.strip() == "yes"


def sa_kubectl(cluster: Cluster, kubeconfig: Path, *args: str) -> Any:
    return cluster.kubectl("--kubeconfig", str(kubeconfig), *args, check=False)


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
    for crd in ("vllmservices.serving.vllmop.io", "clusterkopfpeerings.kopf.dev"):
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
    dep = apps.read_namespaced_deployment(fullname, namespace)
    assert dep.status.ready_replicas == 1  # kwok plays the kubelet
    for kind, name in [
        ("serviceaccount", fullname),
        ("configmap", fullname),
        ("clusterrole", fullname),
        ("clusterrolebinding", fullname),
    ]:
        cluster.kubectl("get", kind, name, "-n", namespace)

    kubeconfig = token_kubeconfig(cluster, namespace, release, tmp_path)
    user = sa_user(namespace, release)
    container = installed_container(cluster, "deployment", namespace, fullname)
    assert container["command"] == ["vllm-operator", "run"]
    assert "--all-namespaces" in container["args"]
    # Cluster scope, run on this shared cluster in one namespace only (-n) so that it does not
    # reconcile other sessions' VLLMServices; the ClusterRoleBinding grants the same verbs in
    # every namespace, and the cluster-wide list/watch is checked with can-i below.
    # In namespaced mode kopf also lists namespaces at start-up, which the cluster-wide pod never
    # does; a test-only grant stands in for that difference (removed below).
    container = {
        **container,
        "args": [
            f"--namespace={app_ns}" if a == "--all-namespaces" else a for a in container["args"]
        ],
    }
    ns_reader = f"{release}-test-namespace-reader"
    cluster.kubectl(
        "create", "clusterrole", ns_reader, "--verb=list,watch", "--resource=namespaces"
    )
    cluster.kubectl(
        "create",
        "clusterrolebinding",
        ns_reader,
        f"--clusterrole={ns_reader}",
        f"--serviceaccount={namespace}:{fullname}",
    )
    op = OperatorRun(
        container,
        kubeconfig=kubeconfig,
        config_file=installed_config(cluster, namespace, fullname, tmp_path),
        log_path=tmp_path / "operator.log",
        pod_id=f"{fullname}-0",
    )
    op.start()
    try:
        wait_until(op.healthz, timeout=60, what="kopf's /healthz (the livenessProbe target)")
        obj = load_example("three-layer-budgets.yaml", app_ns)
        pod_spec = reconcile_as_the_service_account(cluster, apps, obj, gpu, op, audit, user)
        assert pod_spec.node_selector == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    finally:
        op.stop()
        cluster.kubectl("delete", "clusterrolebinding,clusterrole", ns_reader, check=False)

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
        ("delete", "deployments.apps", "-n", app_ns),
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
    helm(
        "upgrade",
        release,
        str(CHART),
        "-n",
        namespace,
        "--wait",
        "--timeout=3m",
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
    cluster.kubectl("get", "vllmservice", obj["metadata"]["name"], "-n", app_ns)


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
    kubeconfig = token_kubeconfig(cluster, namespace, release, tmp_path)
    user = sa_user(namespace, release)
    # exactly the installed pod's command line: -n per watched namespace
    container = installed_container(cluster, "deployment", namespace, fullname)
    assert container["args"][:2] == [f"--namespace={watched}", f"--namespace={also_watched}"]
    op = OperatorRun(
        container,
        kubeconfig=kubeconfig,
        config_file=installed_config(cluster, namespace, fullname, tmp_path),
        log_path=tmp_path / "operator.log",
        pod_id=f"{fullname}-0",
    )
    op.start()
    try:
        wait_until(op.healthz, timeout=60, what="kopf's /healthz")
        mine = load_example("minimal.yaml", watched)
        mine["spec"]["gpu"]["type"] = gpu
        wait_ready(cluster, create(cluster, mine), op)
        theirs = load_example("minimal.yaml", unwatched)
        theirs["spec"]["gpu"]["type"] = gpu
        create(cluster, theirs)
        got = wait_until(
            lambda: (
                {("patch", "deployments", "2xx"), ("patch", "vllmservices/status", "2xx")}
                <= writes(audit, user, watched)
                and writes(audit, user, watched)
            ),
            timeout=30,
            what="the ServiceAccount's writes in the watched namespace",
        )
        assert ("create", "events", "2xx") in got
        assert refused(audit, user) == []
        assert permission_problems(op.log()) == []
        # it never wrote anything in the namespace it does not watch
        assert writes(audit, user, unwatched) == set()
    finally:
        op.stop()
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
