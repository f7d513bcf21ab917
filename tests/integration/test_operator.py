"""The operator against the real API server: apply, edit, refuse, repair, delete, restart."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.support.kube import ROOT, Cluster
from tests.support.operator import OperatorProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration

GROUP, VERSION, PLURAL = "serving.vllmop.io", "v1alpha1", "vllmservices"


def load_example(name: str, namespace: str) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((ROOT / "examples" / name).read_text())
    obj["metadata"]["namespace"] = namespace
    return obj


def apply(cluster: Cluster, obj: dict[str, Any], check: bool = True) -> Any:
    return cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj), check=check)


def get_svc(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    api = client.CustomObjectsApi(cluster.api)
    obj: dict[str, Any] = api.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)
    return obj


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    conds = obj.get("status", {}).get("conditions") or []
    return next((c for c in conds if c["type"] == type_), None)


def wait_ready(
    cluster: Cluster, ns: str, name: str, op: OperatorProcess, timeout: float = 90
) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        obj = get_svc(cluster, ns, name)
        cond = condition(obj, "Ready")
        gen_ok = obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]
        return obj if cond and cond["status"] == "True" and gen_ok else None

    try:
        return wait_until(ready, timeout=timeout, what=f"{ns}/{name} Ready")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\noperator log:\n{op.log_tail()}") from None


def wait_degraded(
    cluster: Cluster, ns: str, name: str, *, timeout: float, what: str
) -> dict[str, Any]:
    def degraded() -> dict[str, Any] | None:
        cond = condition(get_svc(cluster, ns, name), "Degraded")
        return cond if cond and cond["status"] == "True" else None

    result: dict[str, Any] = wait_until(degraded, timeout=timeout, what=what)
    return result


def container_args(apps: client.AppsV1Api, ns: str, name: str) -> list[str]:
    dep = apps.read_namespaced_deployment(name, ns)
    args: list[str] = dep.spec.template.spec.containers[0].args
    return args


def flag_value(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def test_example_becomes_ready_on_its_gpu_type(
    cluster: Cluster,
    operator_process: OperatorProcess,
    namespace: str,
    apps: client.AppsV1Api,
    core: client.CoreV1Api,
) -> None:
    obj = load_example("three-layer-budgets.yaml", namespace)
    name = obj["metadata"]["name"]
    apply(cluster, obj)
    svc = wait_ready(cluster, namespace, name, operator_process)

    args = container_args(apps, namespace, name)
    assert args[0] == obj["spec"]["model"]
    assert flag_value(args, "--max-num-queued-reqs") == "32"
    assert flag_value(args, "--max-num-queued-tokens") == "12000"
    assert flag_value(args, "--max-num-seqs") == "16"
    assert flag_value(args, "--max-num-active-seqs") == "8"
    assert flag_value(args, "--max-num-batched-tokens") == "4096"
    assert svc["status"]["effective"]["args"] == args

    dep = apps.read_namespaced_deployment(name, namespace)
    # status.effective comes from the same rendering as the Deployment the pods run
    assert "image" not in obj["spec"]
    effective = svc["status"]["effective"]
    assert effective["image"] == dep.spec.template.spec.containers[0].image
    assert effective["specHash"] == dep.spec.template.metadata.labels[f"{GROUP}/spec-hash"]
    limits = dep.spec.template.spec.containers[0].resources.limits
    assert limits["nvidia.com/gpu"] == str(obj["spec"]["gpu"]["count"])
    assert dep.metadata.owner_references[0].kind == "VLLMService"

    pods = core.list_namespaced_pod(namespace, label_selector=f"{GROUP}/vllmservice={name}").items
    assert pods, "no pods"
    for pod in pods:
        node = core.read_node(pod.spec.node_name)
        assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert core.read_namespaced_service(name, namespace).spec.ports[0].port == 8000


def test_budget_edit_rolls_the_deployment(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str, apps: client.AppsV1Api
) -> None:
    obj = load_example("three-layer-budgets.yaml", namespace)
    name = obj["metadata"]["name"]
    apply(cluster, obj)
    first = wait_ready(cluster, namespace, name, operator_process)
    edited = copy.deepcopy(obj)
    edited["spec"]["budgets"]["running"]["maxActiveSeqs"] = 4
    apply(cluster, edited)
    svc = wait_ready(cluster, namespace, name, operator_process)
    assert svc["metadata"]["generation"] == first["metadata"]["generation"] + 1
    assert svc["status"]["observedGeneration"] == svc["metadata"]["generation"]
    assert flag_value(container_args(apps, namespace, name), "--max-num-active-seqs") == "4"
    labels = apps.read_namespaced_deployment(name, namespace).spec.template.metadata.labels
    assert svc["status"]["effective"]["specHash"] == labels[f"{GROUP}/spec-hash"]
    assert svc["status"]["effective"]["specHash"] != first["status"]["effective"]["specHash"]


def test_drift_is_repaired(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str, apps: client.AppsV1Api
) -> None:
    obj = load_example("minimal.yaml", namespace)
    name = obj["metadata"]["name"]
    apply(cluster, obj)
    wait_ready(cluster, namespace, name, operator_process)
    want = container_args(apps, namespace, name)
    apps.patch_namespaced_deployment(
        name,
        namespace,
        [{"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": ["tampered"]}],
        _content_type="application/json-patch+json",
    )
    wait_until(
        lambda: container_args(apps, namespace, name) == want,
        timeout=60,
        what="the operator to restore the rendered args",
    )


def test_unknown_gpu_type_is_reported(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str, apps: client.AppsV1Api
) -> None:
    obj = load_example("minimal.yaml", namespace)
    obj["spec"]["gpu"]["type"] = "RTX-9090"
    name = obj["metadata"]["name"]
    apply(cluster, obj)

    cond = wait_degraded(
        cluster, namespace, name, timeout=60, what="Degraded=True for an unknown GPU type"
    )
    assert cond["reason"] == "UnknownGPUType"
    assert "RTX-9090" in cond["message"]
    assert apps.list_namespaced_deployment(namespace).items == []


def test_no_node_fits_is_reported(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str
) -> None:
    obj = load_example("minimal.yaml", namespace)
    obj["spec"]["gpu"]["count"] = 8
    obj["spec"]["gpu"]["type"] = "L4"  # L4 nodes have 4 GPUs each
    # a model whose 32 attention heads 8 GPUs divide, or vLLM (and the renderer) refuses it
    obj["spec"]["model"] = "meta-llama/Llama-3.1-8B-Instruct"
    name = obj["metadata"]["name"]
    apply(cluster, obj)

    cond = wait_degraded(
        cluster, namespace, name, timeout=90, what="Degraded=True for a pod no node fits"
    )
    assert cond["reason"] == "Unschedulable"
    assert "Insufficient nvidia.com/gpu" in cond["message"]


def test_delete_removes_children(
    cluster: Cluster,
    operator_process: OperatorProcess,
    namespace: str,
    apps: client.AppsV1Api,
    core: client.CoreV1Api,
) -> None:
    obj = load_example("minimal.yaml", namespace)
    name = obj["metadata"]["name"]
    apply(cluster, obj)
    wait_ready(cluster, namespace, name, operator_process)
    cluster.kubectl("delete", "vllmservice", name, "-n", namespace, "--wait=true")
    wait_until(
        lambda: (
            not apps.list_namespaced_deployment(namespace).items
            and not core.list_namespaced_service(namespace).items
        ),
        timeout=60,
        what="garbage collection of the Deployment and Service",
    )


def test_restart_mid_way_converges_without_duplicates(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str, apps: client.AppsV1Api
) -> None:
    objs = [load_example("minimal.yaml", namespace) for _ in range(3)]
    for i, obj in enumerate(objs):
        obj["metadata"]["name"] = f"restart-{i}"
        apply(cluster, obj)
    # Stopped while it works through the new objects, then started again: the resume handler and
    # server-side apply must reach one Deployment per service, whatever was done before the stop.
    operator_process.stop()
    operator_process.start()
    for obj in objs:
        wait_ready(cluster, namespace, obj["metadata"]["name"], operator_process)
    deps = apps.list_namespaced_deployment(namespace).items
    assert sorted(d.metadata.name for d in deps) == ["restart-0", "restart-1", "restart-2"]
    for dep in deps:
        rs = apps.list_namespaced_replica_set(
            namespace, label_selector=f"{GROUP}/vllmservice={dep.metadata.name}"
        ).items
        assert len(rs) == 1, f"{dep.metadata.name}: {len(rs)} ReplicaSets"


def test_reconciling_an_unchanged_service_writes_nothing(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str
) -> None:
    import logging

    from vllm_operator.config import load_operator_config
    from vllm_operator.handlers.deps import Deps
    from vllm_operator.handlers.reconcile import reconcile
    from vllm_operator.k8s.client import KubeClient

    obj = load_example("three-layer-budgets.yaml", namespace)
    name = obj["metadata"]["name"]
    apply(cluster, obj)
    body = wait_ready(cluster, namespace, name, operator_process)
    deps = Deps(cfg=load_operator_config({}), kube=KubeClient(cluster.api))
    reconcile(body, deps=deps, logger=logging.getLogger("test"))
    assert deps.kube.writes == 0
    # and a real change is written: the same function is not simply inert
    body["spec"]["budgets"]["running"]["maxActiveSeqs"] = 4
    body["metadata"]["generation"] += 1
    reconcile(body, deps=deps, logger=logging.getLogger("test"))
    assert deps.kube.writes >= 2  # the Deployment and the status


def test_with_autoscaling_the_tuner_owns_replicas(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str, apps: client.AppsV1Api
) -> None:
    obj = load_example("autotune-recommend.yaml", namespace)
    obj["spec"]["replicas"] = 3  # the initial count when autoscaling is on
    name = obj["metadata"]["name"]
    apply(cluster, obj)
    wait_ready(cluster, namespace, name, operator_process)
    dep = apps.read_namespaced_deployment(name, namespace)
    assert dep.spec.replicas == 3
    owners = {
        m.manager
        for m in dep.metadata.managed_fields
        if "f:replicas" in ((m.fields_v1 or {}).get("f:spec") or {})
    }
    assert owners == {"vllm-operator-tuner"}
    # the renderer's next apply (a budget edit) leaves the replica count alone
    obj["spec"]["budgets"]["running"]["maxActiveSeqs"] = 8
    apply(cluster, obj)
    wait_until(
        lambda: flag_value(container_args(apps, namespace, name), "--max-num-active-seqs") == "8",
        timeout=60,
        what="the budget edit to roll out",
    )
    assert apps.read_namespaced_deployment(name, namespace).spec.replicas == 3


def test_no_finalizer_so_deletion_needs_no_running_operator(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str, apps: client.AppsV1Api
) -> None:
    obj = load_example("minimal.yaml", namespace)
    name = obj["metadata"]["name"]
    apply(cluster, obj)
    svc = wait_ready(cluster, namespace, name, operator_process)
    assert not svc["metadata"].get("finalizers")
    operator_process.stop()
    try:
        cluster.kubectl("delete", "vllmservice", name, "-n", namespace, "--timeout=30s")
        wait_until(
            lambda: not apps.list_namespaced_deployment(namespace).items,
            timeout=60,
            what="garbage collection without the operator",
        )
    finally:
        operator_process.start()


def test_only_one_replica_holds_the_loops_lease(cluster: Cluster, namespace: str) -> None:
    from datetime import UTC, datetime, timedelta

    from vllm_operator.handlers.leader import LeaseGate
    from vllm_operator.k8s.client import KubeClient

    kube = KubeClient(cluster.api)
    now = datetime.now(UTC)
    a = LeaseGate(kube, namespace, "loops", identity="a", duration=30)
    b = LeaseGate(kube, namespace, "loops", identity="b", duration=30)
    assert a.try_hold(now) and a.held
    assert not b.try_hold(now + timedelta(seconds=5)) and not b.held
    assert a.try_hold(now + timedelta(seconds=10))  # renewal
    # a stops renewing: after the lease duration b takes over, and a learns it lost it
    assert b.try_hold(now + timedelta(seconds=45))
    assert not a.try_hold(now + timedelta(seconds=50))
    lease = kube.get("coordination.k8s.io/v1", "Lease", namespace, "loops")
    assert lease is not None and lease["spec"]["holderIdentity"] == "b"


def test_budgets_vllm_would_refuse_on_the_gpu_are_reported_not_deployed(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str, apps: client.AppsV1Api
) -> None:
    obj = load_example("l4-small-model.yaml", namespace)
    obj["spec"].setdefault("budgets", {})["running"] = {"maxSeqs": 4096}
    obj["spec"]["budgets"].pop("tokens", None)
    name = obj["metadata"]["name"]
    apply(cluster, obj)  # the API server accepts it: the conflict is with a GPU-dependent default

    cond = wait_degraded(
        cluster, namespace, name, timeout=60, what="Degraded=True for budgets vLLM would refuse"
    )
    assert cond["reason"] == "InvalidSpec"
    assert "spec.budgets.running.maxSeqs" in cond["message"] and "L4" in cond["message"]
    assert apps.list_namespaced_deployment(namespace).items == []


def test_a_child_the_api_refuses_is_reported_in_status(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str
) -> None:
    # A ResourceQuota of zero Services: the API server refuses the operator's Service apply.
    core = client.CoreV1Api(cluster.api)
    core.create_namespaced_resource_quota(
        namespace, {"metadata": {"name": "no-services"}, "spec": {"hard": {"services": "0"}}}
    )
    obj = load_example("minimal.yaml", namespace)
    name = obj["metadata"]["name"]
    apply(cluster, obj)

    cond = wait_degraded(
        cluster, namespace, name, timeout=60, what="Degraded=True when a child is refused"
    )
    assert cond["reason"] == "ApplyFailed"
    assert "services" in cond["message"] and "403" in cond["message"]
    # The Deployment went in before the refused Service; status counts its replicas, not 0.
    apps = client.AppsV1Api(cluster.api)
    desired = apps.read_namespaced_deployment(name, namespace).spec.replicas
    assert desired == obj["spec"].get("replicas", 1) >= 1
    wait_until(
        lambda: get_svc(cluster, namespace, name)["status"].get("replicas") == desired,
        timeout=30,
        what="status.replicas to count the Deployment's replicas",
    )
