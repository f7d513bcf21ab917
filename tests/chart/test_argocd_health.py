"""The Argo CD health check (examples/gitops/argocd/health.lua) on real VLLMService objects.

The script runs in Lua 5.1 (lupa's lua51 module), the language version of gopher-lua, which
Argo CD embeds. Its input is what the API server returns while a real operator process works on
the objects: a fresh object without status, every status version of a rollout, a spec edit the
operator has not seen yet, and the two Degraded causes the operator reports.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, watch

from tests.chart.support import OperatorRun
from tests.support.kube import ROOT, Cluster
from tests.support.operator import install_crds

pytestmark = pytest.mark.integration

GROUP, VERSION, PLURAL = "serving.vllmop.io", "v1alpha1", "vllmservices"
HEALTH_LUA = ROOT / "examples" / "gitops" / "argocd" / "health.lua"
CM_PATCH = ROOT / "examples" / "gitops" / "argocd" / "argocd-cm-patch.yaml"


def lua_health(obj: dict[str, Any]) -> tuple[str, str]:
    from lupa import lua51

    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = lua.table_from(obj, recursive=True)
    hs = lua.execute(HEALTH_LUA.read_text())
    return str(hs["status"]), str(hs["message"])


def test_the_argocd_cm_patch_carries_the_same_script() -> None:
    cm = yaml.safe_load(CM_PATCH.read_text())
    key = "resource.customizations.health.serving.vllmop.io_VLLMService"
    assert cm["data"][key] == HEALTH_LUA.read_text()


@pytest.fixture
def operator_here(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[OperatorRun]:
    """The operator (cluster admin's kubeconfig) watching this test's namespace only, so that it
    never reconciles objects of other tests or sessions."""
    install_crds(cluster)
    config = tmp_path / "config.yaml"
    config.write_text("{}\n")
    op = OperatorRun(
        {
            "command": ["vllm-operator", "run"],
            "args": [f"--namespace={namespace}", "--liveness=http://x/healthz"],
        },
        kubeconfig=cluster.kubeconfig,
        config_file=config,
        log_path=tmp_path / "operator.log",
        pod_id="health-test",
    )
    op.start()
    yield op
    op.stop()


def create(cluster: Cluster, obj: dict[str, Any]) -> dict[str, Any]:
    api = client.CustomObjectsApi(cluster.api)
    created: dict[str, Any] = api.create_namespaced_custom_object(
        GROUP, VERSION, obj["metadata"]["namespace"], PLURAL, obj
    )
    return created


def versions_until(
    cluster: Cluster, created: dict[str, Any], done: Any, op: OperatorRun, timeout: int = 90
) -> list[dict[str, Any]]:
    """Every version of the object the API server stores from its creation until `done`."""
    api = client.CustomObjectsApi(cluster.api)
    meta = created["metadata"]
    seen: list[dict[str, Any]] = []
    w = watch.Watch()
    for event in w.stream(
        api.list_namespaced_custom_object,
        GROUP,
        VERSION,
        meta["namespace"],
        PLURAL,
        field_selector=f"metadata.name={meta['name']}",
        resource_version=meta["resourceVersion"],
        timeout_seconds=timeout,
    ):
        seen.append(copy.deepcopy(event["object"]))
        if done(event["object"]):
            w.stop()
            return seen
    raise AssertionError(f"no final state in {timeout}s; saw {seen[-1:]!r}\n{op.log()[-3000:]}")


def example(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((ROOT / "examples" / name).read_text())
    obj["metadata"]["namespace"] = namespace
    obj["spec"].update(spec)
    return obj


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next(
        (c for c in obj.get("status", {}).get("conditions") or [] if c["type"] == type_), None
    )


def is_true(obj: dict[str, Any], type_: str) -> bool:
    cond = condition(obj, type_)
    current = obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]
    return bool(cond and cond["status"] == "True" and current)


def test_rollout_is_progressing_then_healthy(
    cluster: Cluster, namespace: str, operator_here: OperatorRun
) -> None:
    created = create(cluster, example("three-layer-budgets.yaml", namespace))
    assert "status" not in created
    assert lua_health(created) == ("Progressing", "Waiting for the operator to report status")

    versions = versions_until(cluster, created, lambda o: is_true(o, "Ready"), operator_here)
    health = [lua_health(v) for v in versions if v.get("status")]
    # the operator's first report: the Deployment is rolling out
    rolling = [v for v in versions if is_true(v, "Progressing")]
    assert rolling, "no version with Progressing=True was stored"
    status, message = lua_health(rolling[0])
    assert status == "Progressing"
    assert message.startswith("RollingOut: Rolling out: 0/2 replicas updated")
    # and at the end, Ready for the current generation
    assert health[-1] == ("Healthy", "ReplicasAvailable: 2/2 replicas ready.")
    assert all(s in ("Progressing", "Healthy") for s, _ in health), health
    # what scripts and CI jobs use: kubectl waits on the same Ready condition
    name = created["metadata"]["name"]
    waited = cluster.kubectl(
        "wait", "--for=condition=Ready", f"vllmservice/{name}", "-n", namespace, "--timeout=60s"
    )
    assert f"vllmservice.serving.vllmop.io/{name} condition met" in waited.stdout

    # a spec edit the operator has not observed yet: its old Ready says nothing about the new spec
    api = client.CustomObjectsApi(cluster.api)
    edited: dict[str, Any] = api.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        created["metadata"]["name"],
        {"spec": {"budgets": {"running": {"maxActiveSeqs": 4}}}},
    )
    generation, observed = edited["metadata"]["generation"], edited["status"]["observedGeneration"]
    assert generation == observed + 1
    assert condition(edited, "Ready")["status"] == "True"  # still there, from the old spec
    assert lua_health(edited) == (
        "Progressing",
        f"Waiting for the operator to observe generation {generation} (it reported on {observed})",
    )
    final = versions_until(cluster, edited, lambda o: is_true(o, "Ready"), operator_here)[-1]
    assert lua_health(final)[0] == "Healthy"


def test_unknown_gpu_type_is_degraded(
    cluster: Cluster, namespace: str, operator_here: OperatorRun
) -> None:
    obj = example("minimal.yaml", namespace, gpu={"type": "RTX-9090"})
    versions = versions_until(
        cluster, create(cluster, obj), lambda o: is_true(o, "Degraded"), operator_here
    )
    status, message = lua_health(versions[-1])
    assert status == "Degraded"
    assert message.startswith("UnknownGPUType: ") and "RTX-9090" in message


def test_pods_no_node_fits_are_degraded(
    cluster: Cluster, namespace: str, operator_here: OperatorRun
) -> None:
    obj = example("minimal.yaml", namespace, gpu={"type": "L4", "count": 8})  # L4 nodes have 4
    versions = versions_until(
        cluster, create(cluster, obj), lambda o: is_true(o, "Degraded"), operator_here
    )
    final = versions[-1]
    status, message = lua_health(final)
    assert status == "Degraded"
    assert message.startswith("Unschedulable: ") and "Insufficient nvidia.com/gpu" in message
    # Progressing may or may not still be True by then (the Deployment controller's timing);
    # with both True, Degraded must win.
    both = copy.deepcopy(final)
    for cond in both["status"]["conditions"]:
        if cond["type"] == "Progressing":
            cond["status"] = "True"
    assert lua_health(both)[0] == "Degraded"
