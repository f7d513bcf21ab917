"""GitOps health of real VLLMService objects: Argo CD's Lua check and kstatus (Flux, kpt, ...).

The Argo CD script (examples/gitops/argocd/health.lua) runs in Lua 5.1 (lupa's lua51 module), the
language version of gopher-lua, which Argo CD embeds. kstatus is sigs.k8s.io/cli-utils' own
status.Compute, built from its Go module by e2e/kstatus.sh. Their input is what the API server
returns while a real operator process works on the objects: a fresh object without status, every
status version of a rollout, a spec edit the operator has not seen yet, and the two Degraded
causes the operator reports.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.chart.objects import GROUP, PLURAL, VERSION, create, versions_until
from tests.chart.support import OperatorRun
from tests.support.kube import ROOT, Cluster
from tests.support.operator import install_crds

pytestmark = pytest.mark.integration

HEALTH_LUA = ROOT / "examples" / "gitops" / "argocd" / "health.lua"
CM_PATCH = ROOT / "examples" / "gitops" / "argocd" / "argocd-cm-patch.yaml"


def lua_health(obj: dict[str, Any]) -> tuple[str, str]:
    from lupa import lua51

    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = lua.table_from(obj, recursive=True)
    hs = lua.execute(HEALTH_LUA.read_text())
    return str(hs["status"]), str(hs["message"])


@pytest.fixture(scope="session")
def kstatus_bin() -> str:
    built = subprocess.run(
        [str(ROOT / "e2e" / "kstatus.sh")], check=True, capture_output=True, text=True, timeout=600
    )
    return built.stdout.strip()


def kstatus(binary: str, objs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """kstatus' verdict (Current, InProgress, Failed, ...) and message for each object."""
    lines = "".join(json.dumps(o) + "\n" for o in objs)
    out = subprocess.run([binary], input=lines, check=True, capture_output=True, text=True)
    verdicts = [json.loads(line) for line in out.stdout.splitlines()]
    assert not any(v.get("error") for v in verdicts), verdicts
    return [(v["status"], v["message"]) for v in verdicts]


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
    cluster: Cluster, namespace: str, operator_here: OperatorRun, kstatus_bin: str
) -> None:
    created = create(cluster, example("three-layer-budgets.yaml", namespace))
    name = created["metadata"]["name"]
    assert "status" not in created
    assert lua_health(created) == ("Progressing", "Waiting for the operator to report status")
    # kstatus' one gap: no status at all reads as Current (healthCheckExprs in
    # examples/gitops/flux cover that moment with an inProgress rule)
    assert kstatus(kstatus_bin, [created]) == [("Current", "Resource is current")]

    # kwok rolls out in milliseconds, so the operator may report Ready at once or after a
    # version or two of RollingOut: every version must read as progress, and the last as done.
    versions = versions_until(cluster, created, lambda o: is_true(o, "Ready"), operator_here)
    reported = [v for v in versions if v.get("status")]
    health = [lua_health(v) for v in reported]
    assert all(s in ("Progressing", "Healthy") for s, _ in health), health
    assert health[-1] == ("Healthy", "ReplicasAvailable: 2/2 replicas ready.")
    verdicts = kstatus(kstatus_bin, reported)  # Flux wait: true reads Ready=False as InProgress
    assert [s for s, _ in verdicts[:-1]] == ["InProgress"] * (len(verdicts) - 1), verdicts
    assert verdicts[-1] == ("Current", "Resource is Ready")
    # what scripts and CI jobs use: kubectl waits on the same Ready condition
    waited = cluster.kubectl(
        "wait", "--for=condition=Ready", f"vllmservice/{name}", "-n", namespace, "--timeout=60s"
    )
    assert f"vllmservice.serving.vllmop.io/{name} condition met" in waited.stdout

    # A rollout held in progress: pause the Deployment (a field the operator does not own, so it
    # stays), then edit the spec. The new template is applied but no pod rolls.
    cluster.kubectl(
        "patch", "deployment", name, "-n", namespace, "--type=merge", "-p",
        '{"spec": {"paused": true}}',
    )  # fmt: skip
    api = client.CustomObjectsApi(cluster.api)
    edited: dict[str, Any] = api.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name,
        {"spec": {"budgets": {"running": {"maxActiveSeqs": 4}}}},
    )  # fmt: skip
    # a spec edit the operator has not observed yet: its old Ready says nothing about the new spec.
    # That Ready is usually still True; it is False for a moment when the operator's pass for the
    # pause ran before the Deployment controller observed it (kstatus' own rule for a Deployment
    # whose observedGeneration lags). Either way the old generation decides.
    generation, observed = edited["metadata"]["generation"], edited["status"]["observedGeneration"]
    assert generation == observed + 1
    assert condition(edited, "Ready") is not None  # still there, from the old spec
    assert lua_health(edited) == (
        "Progressing",
        f"Waiting for the operator to observe generation {generation} (it reported on {observed})",
    )
    assert kstatus(kstatus_bin, [edited])[0][0] == "InProgress"
    # the case that matters, held still: Ready=True from the old spec must not read as done
    stale = copy.deepcopy(reported[-1])
    stale["metadata"]["generation"] += 1
    assert condition(stale, "Ready")["status"] == "True"
    assert lua_health(stale)[0] == "Progressing"
    assert kstatus(kstatus_bin, [stale])[0][0] == "InProgress"

    def held(o: dict[str, Any]) -> bool:
        cond = condition(o, "Progressing") or {}
        return is_true(o, "Progressing") and "0/2 replicas updated" in cond.get("message", "")

    rolling = versions_until(cluster, edited, held, operator_here)[-1]
    assert lua_health(rolling) == (
        "Progressing",
        "RollingOut: Rolling out: 0/2 replicas updated, 2 new pods at a time, each ready before an "
        "old one stops.",
    )
    # kstatus reads the Ready condition here, and says why it is False
    assert kstatus(kstatus_bin, [rolling]) == [
        ("InProgress", "2/2 replicas ready, 0/2 on the current spec.")
    ]
    cluster.kubectl(
        "patch", "deployment", name, "-n", namespace, "--type=merge", "-p",
        '{"spec": {"paused": false}}',
    )  # fmt: skip
    final = versions_until(cluster, rolling, lambda o: is_true(o, "Ready"), operator_here)[-1]
    assert lua_health(final)[0] == "Healthy"
    assert kstatus(kstatus_bin, [final])[0][0] == "Current"


def test_unknown_gpu_type_is_degraded(
    cluster: Cluster, namespace: str, operator_here: OperatorRun, kstatus_bin: str
) -> None:
    obj = example("minimal.yaml", namespace, gpu={"type": "RTX-9090"})
    versions = versions_until(
        cluster, create(cluster, obj), lambda o: is_true(o, "Degraded"), operator_here
    )
    status, message = lua_health(versions[-1])
    assert status == "Degraded"
    assert message.startswith("UnknownGPUType: ") and "RTX-9090" in message
    # no retry fixes this spec: Stalled=True makes kstatus say Failed, so Flux fails fast
    verdict, why = kstatus(kstatus_bin, [versions[-1]])[0]
    assert verdict == "Failed" and "RTX-9090" in why


def test_pods_no_node_fits_are_degraded(
    cluster: Cluster, namespace: str, operator_here: OperatorRun, kstatus_bin: str
) -> None:
    # L4 nodes have 4 GPUs; a model whose 32 attention heads 8 divides (vLLM's start-up rule)
    obj = example(
        "minimal.yaml",
        namespace,
        model="meta-llama/Llama-3.1-8B-Instruct",
        gpu={"type": "L4", "count": 8},
    )
    versions = versions_until(
        cluster, create(cluster, obj), lambda o: is_true(o, "Degraded"), operator_here
    )
    final = versions[-1]
    status, message = lua_health(final)
    assert status == "Degraded"
    assert message.startswith("Unschedulable: ") and "Insufficient nvidia.com/gpu" in message
    # a GPU may free up or a node be added: kstatus waits (InProgress) until the Deployment's
    # progress deadline passes, which the operator reports as Stalled
    assert kstatus(kstatus_bin, [final])[0][0] == "InProgress"
    # Progressing may or may not still be True by then (the Deployment controller's timing);
    # with both True, Degraded must win.
    both = copy.deepcopy(final)
    for cond in both["status"]["conditions"]:
        if cond["type"] == "Progressing":
            cond["status"] = "True"
    assert lua_health(both)[0] == "Degraded"
