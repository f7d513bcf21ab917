"""What the chart tier's cluster tests share: releases, tokens, installs, audit-log reads."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.chart.objects import create, versions_until
from tests.chart.support import (
    CHART,
    VALUES_DIR,
    Helm,
    OperatorRun,
    write_token_kubeconfig,
)
from tests.support.audit import AuditLog
from tests.support.kube import ROOT, Cluster
from tests.support.vllmsvc import get
from tests.support.wait import wait_until

CRD_FILES = sorted((CHART / "crds").glob("*.yaml"))


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
    helm: Helm,
    release: str,
    namespace: str,
    watched: list[str],
    gpu: str,
    *args: str,
    chart: Path = CHART,
) -> None:
    """The chart in namespaced mode, watching `watched`, with the test's own GPU type; `args`:
    more helm install arguments."""
    install_chart(
        helm,
        release,
        namespace,
        "-f",
        str(VALUES_DIR / "namespaced.yaml"),
        "--set",
        f"watch.namespaces={{{','.join(watched)}}}",
        *gpu_catalog_sets(gpu),
        *args,
        chart=chart,
    )


def install_chart(
    helm: Helm, release: str, namespace: str, *args: str, chart: Path = CHART
) -> None:
    helm("install", release, str(chart), "-n", namespace, "--wait", "--timeout=3m", *args)


def upgrade_chart(helm: Helm, release: str, namespace: str, *args: str) -> None:
    """`helm upgrade` to this tree's chart, as docs/user-guide.md tells users to run it."""
    helm("upgrade", release, str(CHART), "-n", namespace, "--wait", "--timeout=3m", *args)


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


# the API's refusal as the kubernetes client and kopf log it; 403 as a word, since the operator's
# info lines carry times and generated names ("t-340355d9cf", ".403Z") that hold those digits
PERMISSION_ERRORS = re.compile(r"[Ff]orbidden|Not enough permissions|\b403\b")


def permission_problems(log: str, allowed: tuple[str, ...] = ()) -> list[str]:
    return [
        line
        for line in log.splitlines()
        if PERMISSION_ERRORS.search(line) and not any(a in line for a in allowed)
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


def watching(container: dict[str, Any], namespaces: list[str]) -> dict[str, Any]:
    """The cluster-scope pod's container, run on this shared cluster in `namespaces` only (-n
    each) so that it does not reconcile other sessions' VLLMServices. Its ClusterRoleBinding
    grants the same verbs in every namespace; the cluster-wide list/watch is checked with can-i."""
    args = container["args"]
    assert "--all-namespaces" in args, args
    at = args.index("--all-namespaces")
    scoped = [*args[:at], *(f"--namespace={ns}" for ns in namespaces), *args[at + 1 :]]
    return {**container, "args": scoped}


@contextmanager
def namespace_reader(cluster: Cluster, namespace: str, release: str) -> Iterator[None]:
    """In namespaced mode kopf also lists namespaces at start-up, which the cluster-wide pod never
    does: a test-only grant stands in for that difference while `watching` is in force."""
    name = f"{release}-test-namespace-reader"
    cluster.kubectl("create", "clusterrole", name, "--verb=list,watch", "--resource=namespaces")
    try:
        cluster.kubectl(
            "create",
            "clusterrolebinding",
            name,
            f"--clusterrole={name}",
            f"--serviceaccount={namespace}:{release}-vllm-operator",
        )
        yield
    finally:
        cluster.kubectl("delete", "clusterrolebinding,clusterrole", name, check=False)


@contextmanager
def installed_operator(
    cluster: Cluster,
    namespace: str,
    release: str,
    workdir: Path,
    *,
    only: list[str] | None = None,
) -> Iterator[OperatorRun]:
    """The release's operator as it is installed now (its Deployment's command line and config,
    a token of its ServiceAccount), running and healthy; stopped on exit. `only`: a cluster-scope
    release, watching those namespaces (see `watching`)."""
    fullname = f"{release}-vllm-operator"
    container = installed_container(cluster, "deployment", namespace, fullname)
    with namespace_reader(cluster, namespace, release) if only else nullcontext():
        op = OperatorRun(
            watching(container, only) if only else container,
            kubeconfig=token_kubeconfig(cluster, namespace, release, workdir),
            config_file=installed_config(cluster, namespace, fullname, workdir),
            log_path=workdir / "operator.log",
            pod_id=f"{fullname}-0",
        )
        op.start()
        try:
            wait_until(op.healthz, timeout=60, what="kopf's /healthz (the livenessProbe target)")
            yield op
        finally:
            op.stop()


def patch_spec(cluster: Cluster, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A merge patch of the VLLMService's spec, as a user's edit; the object as written."""
    out = cluster.kubectl(
        "patch", "vllmservice", name, "-n", namespace, "--type=merge", "-o", "json",
        "-p", json.dumps({"spec": spec}),
    ).stdout  # fmt: skip
    obj: dict[str, Any] = json.loads(out)
    return obj


def assert_unchanged(cluster: Cluster, namespace: str, kept: dict[str, dict[str, Any]]) -> None:
    """Each kept object still exists as the same object (uid) at the same generation and spec."""
    for kind, before in kept.items():
        now = get(cluster, kind, namespace, before["metadata"]["name"])
        for key in ("uid", "generation"):
            assert now["metadata"].get(key) == before["metadata"].get(key), (kind, key)
        assert now["spec"] == before["spec"], kind
