"""Rendered child manifests: Deployment, Service, monitors; templates; the render command."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures.specs.cases import merge_patch
from vllm_operator.api.errors import parse_vllmservice
from vllm_operator.api.status import BudgetValues
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.catalog import build_gpu_catalog
from vllm_operator.cli import UsageError
from vllm_operator.commands import render as render_command
from vllm_operator.config import OperatorConfig, load_operator_config
from vllm_operator.render import (
    RenderError,
    TemplateOutputError,
    UnknownGPUTypeError,
    build_selector_string,
    render_all,
)

TEMPLATES = Path(__file__).resolve().parents[2] / "operator" / "vllm_operator" / "templates"
CFG = load_operator_config({})
BASE: dict[str, Any] = {
    "apiVersion": "serving.vllmop.io/v1alpha1",
    "kind": "VLLMService",
    "metadata": {"name": "chat", "namespace": "llm"},
    "spec": {"model": "Qwen/Qwen2.5-7B-Instruct", "gpu": {"type": "H100-80GB"}},
}
LABELS = {
    "app.kubernetes.io/name": "vllm",
    "app.kubernetes.io/instance": "chat",
    "app.kubernetes.io/component": "server",
    "app.kubernetes.io/managed-by": "vllm-operator",
    "serving.vllmop.io/vllmservice": "chat",
}
META = {"name": "chat", "namespace": "llm", "labels": LABELS}
SELECTOR = {"serving.vllmop.io/vllmservice": "chat"}


def _svc(patch: dict[str, Any] | None = None) -> VLLMService:
    return parse_vllmservice(merge_patch(BASE, patch or {}))


def _by_kind(svc: VLLMService, cfg: OperatorConfig = CFG, **kw: Any) -> dict[str, dict[str, Any]]:
    return {m["kind"]: m for m in render_all(svc, cfg, **kw).manifests}


def _pod(svc: VLLMService, **kw: Any) -> dict[str, Any]:
    pod: dict[str, Any] = _by_kind(svc, **kw)["Deployment"]["spec"]["template"]["spec"]
    return pod


def _container(svc: VLLMService) -> dict[str, Any]:
    (container,) = _pod(svc)["containers"]
    return dict(container)


def test_minimal_renders_a_deployment_and_a_service() -> None:
    manifests = render_all(_svc(), CFG).manifests
    assert [(m["apiVersion"], m["kind"]) for m in manifests] == [
        ("apps/v1", "Deployment"),
        ("v1", "Service"),
    ]


def test_deployment_whole_object() -> None:
    deployment = _by_kind(_svc())["Deployment"]
    spec_hash = deployment["spec"]["template"]["metadata"]["labels"]["serving.vllmop.io/spec-hash"]
    probe = {"httpGet": {"path": "/health", "port": "http"}, "timeoutSeconds": 5}
    amounts = {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"}
    assert deployment == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": META,
        "spec": {
            "replicas": 1,
            "progressDeadlineSeconds": 2400,
            "selector": {"matchLabels": SELECTOR},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
            },
            "template": {
                "metadata": {"labels": {**LABELS, "serving.vllmop.io/spec-hash": spec_hash}},
                "spec": {
                    "enableServiceLinks": False,
                    "automountServiceAccountToken": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 1000,
                        "runAsGroup": 1000,
                        "fsGroup": 1000,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                    "tolerations": [
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                    ],
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:v0.33.0",
                            "args": [
                                "Qwen/Qwen2.5-7B-Instruct",
                                "--port",
                                "8000",
                                "--tensor-parallel-size",
                                "1",
                            ],
                            "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}],
                            "env": [
                                {"name": "HOME", "value": "/home/vllm"},
                                {"name": "USER", "value": "vllm"},
                                {"name": "HF_HOME", "value": "/home/vllm/.cache/huggingface"},
                                {"name": "VLLM_CACHE_ROOT", "value": "/home/vllm/.cache/vllm"},
                            ],
                            "resources": {"limits": amounts, "requests": amounts},
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]},
                                "readOnlyRootFilesystem": True,
                                "runAsNonRoot": True,
                            },
                            "volumeMounts": [
                                {"name": "dshm", "mountPath": "/dev/shm"},
                                {"name": "home", "mountPath": "/home/vllm"},
                                {"name": "tmp", "mountPath": "/tmp"},
                            ],
                            "startupProbe": {**probe, "periodSeconds": 10, "failureThreshold": 180},
                            "readinessProbe": {**probe, "periodSeconds": 5, "failureThreshold": 3},
                            "livenessProbe": {**probe, "periodSeconds": 10, "failureThreshold": 6},
                        }
                    ],
                    "volumes": [
                        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
                        {"name": "home", "emptyDir": {}},
                        {"name": "tmp", "emptyDir": {}},
                    ],
                },
            },
        },
    }
    assert re.fullmatch(r"[0-9a-f]{16}", spec_hash)


def test_service_whole_object() -> None:
    assert _by_kind(_svc())["Service"] == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": META,
        "spec": {
            "type": "ClusterIP",
            "selector": SELECTOR,
            "ports": [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def test_monitors_whole_objects() -> None:
    svc = _svc(
        {
            "spec": {
                "monitoring": {
                    "serviceMonitor": True,
                    "podMonitor": True,
                    "interval": "15s",
                    "labels": {"release": "kps", "app.kubernetes.io/name": "mine"},
                }
            }
        }
    )
    manifests = render_all(svc, CFG).manifests
    assert [m["kind"] for m in manifests] == [
        "Deployment",
        "Service",
        "ServiceMonitor",
        "PodMonitor",
    ]
    meta = {**META, "labels": {"release": "kps", **LABELS}}
    endpoint = {"port": "http", "path": "/metrics", "interval": "15s"}
    target_labels = ["serving.vllmop.io/vllmservice", "app.kubernetes.io/instance"]
    assert manifests[2] == {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": meta,
        "spec": {
            "selector": {"matchLabels": SELECTOR},
            "endpoints": [endpoint],
            "podTargetLabels": target_labels,
        },
    }
    assert manifests[3] == {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": meta,
        "spec": {
            "selector": {"matchLabels": SELECTOR},
            "podMetricsEndpoints": [endpoint],
            "podTargetLabels": target_labels,
        },
    }


def test_service_monitor_selects_the_service_and_pods_carry_the_target_labels() -> None:
    kinds = _by_kind(_svc({"spec": {"monitoring": {"serviceMonitor": True}}}))
    selector = kinds["ServiceMonitor"]["spec"]["selector"]["matchLabels"]
    assert selector.items() <= kinds["Service"]["metadata"]["labels"].items()
    pod_labels = kinds["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert set(kinds["ServiceMonitor"]["spec"]["podTargetLabels"]) <= pod_labels.keys()
    assert kinds["Service"]["spec"]["selector"].items() <= pod_labels.items()


def test_owner_reference_only_for_stored_objects() -> None:
    for manifest in render_all(_svc(), CFG).manifests:
        assert "ownerReferences" not in manifest["metadata"]
    owned = _svc({"metadata": {"uid": "0b7d-uid"}, "spec": {"monitoring": {"podMonitor": True}}})
    for manifest in render_all(owned, CFG).manifests:
        assert manifest["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "serving.vllmop.io/v1alpha1",
                "kind": "VLLMService",
                "name": "chat",
                "uid": "0b7d-uid",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]


def test_namespace_is_omitted_when_the_object_has_none() -> None:
    for manifest in render_all(_svc({"metadata": {"namespace": None}}), CFG).manifests:
        assert "namespace" not in manifest["metadata"]


@pytest.mark.parametrize(
    ("patch", "overrides", "replicas"),
    [
        ({}, BudgetValues(), 1),
        ({"replicas": 3}, BudgetValues(), 3),
        ({"replicas": 0}, BudgetValues(), 0),
        ({"replicas": 3}, BudgetValues(max_seqs=8), 3),
        ({"autoscaling": {"enabled": True, "maxReplicas": 4}}, BudgetValues(), None),
        ({"autoscaling": {"enabled": False}, "replicas": 2}, BudgetValues(), 2),
    ],
)
def test_replicas_are_left_to_the_tuner_when_autoscaling(
    patch: dict[str, Any], overrides: BudgetValues, replicas: int | None
) -> None:
    deployment = _by_kind(_svc({"spec": patch}), overrides=overrides)["Deployment"]
    assert deployment["spec"].get("replicas") == replicas
    assert ("replicas" in deployment["spec"]) == (replicas is not None)


def test_spec_hash_follows_the_pod_and_nothing_else() -> None:
    def spec_hash(patch: dict[str, Any], overrides: BudgetValues | None = None) -> str:
        result = render_all(_svc(patch), CFG, overrides or BudgetValues())
        labels = result.manifests[0]["spec"]["template"]["metadata"]["labels"]
        assert labels["serving.vllmop.io/spec-hash"] == result.effective.spec_hash
        return labels["serving.vllmop.io/spec-hash"]  # type: ignore[no-any-return]

    base = spec_hash({})
    assert spec_hash({}) == base
    assert spec_hash({"spec": {"replicas": 4}}) == base
    assert spec_hash({"spec": {"monitoring": {"serviceMonitor": True}}}) == base
    changed = [
        spec_hash({"spec": {"image": "vllm/vllm-openai:v0.33.1"}}),
        spec_hash({"spec": {"budgets": {"running": {"maxSeqs": 8}}}}),
        spec_hash({}, BudgetValues(max_seqs=8)),
        spec_hash({"spec": {"engine": {"env": [{"name": "A", "value": "1"}]}}}),
        spec_hash({"spec": {"gpu": {"type": "H100-80GB", "count": 2}}}),
    ]
    assert base not in changed
    # The same args reached two ways give the same pod, so the same hash.
    assert changed[1] == changed[2]
    # The selector never includes the hash: it would orphan pods on every change.
    deployment = render_all(_svc(), CFG).manifests[0]
    assert "serving.vllmop.io/spec-hash" not in deployment["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize(("count", "shm"), [(1, "2Gi"), (2, "4Gi"), (4, "8Gi"), (8, "16Gi")])
def test_shared_memory_scales_with_gpus(count: int, shm: str) -> None:
    pod = _pod(_svc({"spec": {"gpu": {"type": "H100-80GB", "count": count}}}))
    assert pod["volumes"][0] == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}}
    (container,) = pod["containers"]
    amounts = {"cpu": str(8 * count), "memory": f"{64 * count}Gi", "nvidia.com/gpu": str(count)}
    assert container["resources"] == {"limits": amounts, "requests": amounts}


def test_amd_gpus_use_their_resource_and_label() -> None:
    pod = _pod(_svc({"spec": {"gpu": {"type": "MI300X"}}}))
    assert pod["nodeSelector"] == {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"}
    assert pod["tolerations"] == [
        {"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    limits = pod["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": "8", "memory": "64Gi", "amd.com/gpu": "1"}


def test_fallback_types_become_required_and_ordered_preferred_affinity() -> None:
    gpu = {
        "type": "H100-80GB",
        "fallbackTypes": ["H200-141GB", "A100-80GB", "H200-141GB", "H100-80GB"],
    }
    pod = _pod(_svc({"spec": {"gpu": gpu}}))
    assert "nodeSelector" not in pod

    def term(value: str) -> dict[str, Any]:
        expr = {"key": "nvidia.com/gpu.product", "operator": "In", "values": [value]}
        return {"matchExpressions": [expr]}

    products = ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H200", "NVIDIA-A100-SXM4-80GB"]
    assert pod["affinity"] == {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "nvidia.com/gpu.product", "operator": "In", "values": products}
                        ]
                    }
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": term(products[0])},
                {"weight": 90, "preference": term(products[1])},
                {"weight": 80, "preference": term(products[2])},
            ],
        }
    }


def test_fallbacks_with_several_labels_get_their_own_term() -> None:
    cfg = load_operator_config({}).model_copy(
        update={
            "gpu_catalog": load_operator_config({}).gpu_catalog.model_copy(
                update={
                    "types": {
                        **CFG.gpu_catalog.types,
                        "H100-PCIE": CFG.gpu_catalog.types["H100-80GB"].model_copy(
                            update={"node_labels": {"gpu": "h100", "bus": "pcie"}}
                        ),
                    }
                }
            )
        }
    )
    svc = _svc({"spec": {"gpu": {"type": "L4", "fallbackTypes": ["H100-PCIE"]}}})
    affinity = _pod(svc, cfg=cfg)["affinity"]["nodeAffinity"]
    assert affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-L4"]}
            ]
        },
        {
            "matchExpressions": [
                {"key": "bus", "operator": "In", "values": ["pcie"]},
                {"key": "gpu", "operator": "In", "values": ["h100"]},
            ]
        },
    ]


def test_unknown_gpu_type_names_the_field_and_the_known_types() -> None:
    with pytest.raises(UnknownGPUTypeError) as info:
        render_all(_svc({"spec": {"gpu": {"type": "B200-192GB"}}}), CFG)
    assert str(info.value) == (
        "spec.gpu.type: unknown GPU type 'B200-192GB'; known types: A100-40GB, A100-80GB, "
        "H100-80GB, H200-141GB, L4, L40S, MI300X, T4"
    )
    assert (info.value.field, info.value.gpu_type) == ("spec.gpu.type", "B200-192GB")
    with pytest.raises(UnknownGPUTypeError) as info:
        render_all(_svc({"spec": {"gpu": {"type": "L4", "fallbackTypes": ["L40S", "X"]}}}), CFG)
    assert info.value.field == "spec.gpu.fallbackTypes[1]"


def test_fallbacks_must_use_the_same_device_resource() -> None:
    with pytest.raises(RenderError) as info:
        render_all(_svc({"spec": {"gpu": {"type": "H100-80GB", "fallbackTypes": ["MI300X"]}}}), CFG)
    assert str(info.value) == (
        "spec.gpu.fallbackTypes[0]: MI300X uses amd.com/gpu but H100-80GB uses nvidia.com/gpu; "
        "a replica can request only one device resource"
    )


def test_env_secret_and_caches() -> None:
    svc = _svc(
        {
            "spec": {
                "hfTokenSecret": {"name": "hf", "key": "hf-token"},
                "modelCache": {"pvcName": "models", "mountPath": "/models", "readOnly": True},
                "compileCache": {"pvcName": "compile"},
                "engine": {"env": [{"name": "HF_HOME", "value": "/elsewhere"}]},
            }
        }
    )
    pod = _pod(svc)
    container = pod["containers"][0]
    assert container["env"] == [
        {"name": "HOME", "value": "/home/vllm"},
        {"name": "USER", "value": "vllm"},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "hf-token"}}},
        {"name": "HF_HOME", "value": "/models"},
        {"name": "VLLM_CACHE_ROOT", "value": "/home/vllm/.cache/vllm"},
        {"name": "HF_HOME", "value": "/elsewhere"},
    ]
    assert container["volumeMounts"][3:] == [
        {"name": "model-cache", "mountPath": "/models", "readOnly": True},
        {"name": "compile-cache", "mountPath": "/home/vllm/.cache/vllm"},
    ]
    assert pod["volumes"][3:] == [
        {"name": "model-cache", "persistentVolumeClaim": {"claimName": "models", "readOnly": True}},
        {"name": "compile-cache", "persistentVolumeClaim": {"claimName": "compile"}},
    ]


def test_compile_cache_without_claim_is_an_empty_dir_and_can_be_disabled() -> None:
    pod = _pod(_svc({"spec": {"compileCache": {}}}))
    assert pod["volumes"][3] == {"name": "compile-cache", "emptyDir": {}}
    disabled = _pod(_svc({"spec": {"compileCache": {"enabled": False, "pvcName": "c"}}}))
    assert [v["name"] for v in disabled["volumes"]] == ["dshm", "home", "tmp"]


def test_image_comes_from_spec_or_operator_config() -> None:
    assert (
        _container(_svc({"spec": {"image": "mirror/vllm:v0.33.0"}}))["image"]
        == "mirror/vllm:v0.33.0"
    )
    cfg = load_operator_config({"VLLM_OPERATOR_DEFAULT_IMAGE": "mirror/vllm:default"})
    assert _pod(_svc(), cfg=cfg)["containers"][0]["image"] == "mirror/vllm:default"


def test_report_carries_status_facts_and_warnings() -> None:
    svc = _svc(
        {
            "spec": {
                "autoscaling": {"enabled": True, "maxReplicas": 2},
                "monitoring": {"serviceMonitor": True, "podMonitor": True},
                "engine": {"extraArgs": ["--disable_log_stats"]},
            }
        }
    )
    result = render_all(svc, CFG)
    container = result.manifests[0]["spec"]["template"]["spec"]["containers"][0]
    assert result.effective.args == container["args"]
    assert result.effective.image == container["image"]
    assert result.warnings == [
        "spec.monitoring: serviceMonitor and podMonitor are both on; "
        "Prometheus will scrape every pod twice",
        "spec.slo is empty: autotune and autoscaling have no target to steer to",
        "spec.engine.extraArgs: --disable-log-stats turns off the metrics "
        "that autotune and autoscaling read",
    ]
    assert render_all(_svc(), CFG).warnings == []
    assert build_selector_string(svc) == "serving.vllmop.io/vllmservice=chat"


def test_every_template_value_passes_through_tojson() -> None:
    templates = sorted(TEMPLATES.glob("*.j2"))
    assert [t.name for t in templates] == [
        "deployment.yaml.j2",
        "podmonitor.yaml.j2",
        "service.yaml.j2",
        "servicemonitor.yaml.j2",
    ]
    for template in templates:
        expressions = re.findall(r"{{(.*?)}}", template.read_text(encoding="utf-8"))
        assert expressions, template.name
        for expression in expressions:
            assert expression.rstrip().endswith("| tojson"), (template.name, expression)


def test_custom_template_dir_replaces_templates_by_name(tmp_path: Path) -> None:
    text = (TEMPLATES / "service.yaml.j2").read_text(encoding="utf-8")
    (tmp_path / "service.yaml.j2").write_text(
        text.replace("spec:\n", 'spec:\n  sessionAffinity: "ClientIP"\n', 1), encoding="utf-8"
    )
    cfg = load_operator_config({"VLLM_OPERATOR_TEMPLATE_DIR": str(tmp_path)})
    kinds = _by_kind(_svc(), cfg)
    assert kinds["Service"]["spec"]["sessionAffinity"] == "ClientIP"
    assert kinds["Deployment"] == _by_kind(_svc())["Deployment"]  # built-in still used


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{ metadata | tojson }}\n",
            "expected v1 Service",
        ),
        ("apiVersion: v1\nkind: Service\nmetadata: {{ nope | tojson }}\n", "cannot render"),
        ("apiVersion: v1\nkind: Service\nmetadata: {}\n", "no metadata.name"),
        ("apiVersion: v1\nkind: Service\nmetadata: [{{ metadata | tojson }}\n", "not valid YAML"),
        ("- a list\n", "not a YAML map"),
    ],
)
def test_custom_templates_are_checked(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "service.yaml.j2").write_text(text, encoding="utf-8")
    cfg = load_operator_config({"VLLM_OPERATOR_TEMPLATE_DIR": str(tmp_path)})
    with pytest.raises(TemplateOutputError) as info:
        render_all(_svc(), cfg)
    assert info.value.field == "template service.yaml.j2"
    assert message in info.value.message


# --- the `render` command --------------------------------------------------------------------


def _run(tmp_path: Path, text: str, *extra: str) -> int:
    path = tmp_path / "svc.yaml"
    path.write_text(text, encoding="utf-8")
    parser = argparse.ArgumentParser()
    render_command.add_arguments(parser)
    return render_command.run(parser.parse_args(["-f", str(path), *extra]))


def _doc(patch: dict[str, Any] | None = None) -> str:
    return yaml.safe_dump(merge_patch(BASE, patch or {}))


def test_render_command_prints_every_manifest_of_every_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The command reads the process environment; keep a developer's settings out of the check.
    for name in [n for n in os.environ if n.startswith("VLLM_OPERATOR_")]:
        monkeypatch.delenv(name)
    second = _doc({"metadata": {"name": "other"}, "spec": {"monitoring": {"podMonitor": True}}})
    assert _run(tmp_path, _doc() + "---\n" + second) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    expected = (
        render_all(_svc(), CFG).manifests
        + render_all(
            _svc({"metadata": {"name": "other"}, "spec": {"monitoring": {"podMonitor": True}}}), CFG
        ).manifests
    )
    assert docs == expected


def test_render_command_refuses_invalid_specs_with_field_named_lines(tmp_path: Path) -> None:
    bad = _doc({"spec": {"budgets": {"running": {"maxSeqs": 4, "maxActiveSeqs": 8}}}})
    with pytest.raises(UsageError) as info:
        _run(tmp_path, bad)
    path = tmp_path / "svc.yaml"
    assert str(info.value) == (
        f"{path}: spec.budgets.running.maxActiveSeqs must be <= spec.budgets.running.maxSeqs"
    )
    other = _doc({"spec": {"replicas": -1, "gpu": {"count": 0}}})
    with pytest.raises(UsageError) as info:
        _run(tmp_path, _doc() + "---\n" + other + "---\nkind: ConfigMap\n")
    assert str(info.value).splitlines() == [
        f"{path} (document 2): spec.replicas: Input should be greater than or equal to 0",
        f"{path} (document 2): spec.gpu.count: Input should be greater than or equal to 1",
        f"{path} (document 3): not a VLLMService",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no VLLMService documents"),
        ("a: [\n", "not valid YAML"),
    ],
)
def test_render_command_refuses_empty_or_broken_files(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        _run(tmp_path, text)


def test_render_command_reports_unknown_gpu_types(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        _run(tmp_path, _doc({"spec": {"gpu": {"type": "B200"}}}))
    assert str(info.value) == (
        f"{tmp_path / 'svc.yaml'}: spec.gpu.type: unknown GPU type 'B200'; known types: "
        "A100-40GB, A100-80GB, H100-80GB, H200-141GB, L4, L40S, MI300X, T4"
    )


def test_render_command_uses_the_config_file_catalog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "operator.yaml"
    config.write_text(
        "gpuCatalog:\n  B200:\n    resourceName: nvidia.com/gpu\n"
        "    nodeLabels: {nvidia.com/gpu.product: NVIDIA-B200}\n"
        "    memoryGiB: 180\n    memoryBandwidthGBps: 8000\n",
        encoding="utf-8",
    )
    assert _run(tmp_path, _doc({"spec": {"gpu": {"type": "B200"}}}), "--config", str(config)) == 0
    deployment = next(yaml.safe_load_all(capsys.readouterr().out))
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-B200"}
    with pytest.raises(UsageError, match="cannot read"):
        _run(tmp_path, _doc(), "--config", str(tmp_path / "missing.yaml"))


def test_render_command_prints_warnings_to_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = {"spec": {"monitoring": {"serviceMonitor": True, "podMonitor": True}}}
    assert _run(tmp_path, _doc(both)) == 0
    assert capsys.readouterr().err == (
        f"warning: {tmp_path / 'svc.yaml'}: spec.monitoring: serviceMonitor and podMonitor are "
        "both on; Prometheus will scrape every pod twice\n"
    )


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({}, {"cpu": "8", "memory": "64Gi"}),
        ({"gpu": {"type": "L4", "count": 2}}, {"cpu": "16", "memory": "64Gi"}),
        ({"resources": {"cpu": "7500m"}}, {"cpu": "7500m", "memory": "64Gi"}),
        ({"resources": {"memory": "100G"}}, {"cpu": "8", "memory": "100G"}),
    ],
    ids=["catalog-default", "scaled-by-gpu-count", "cpu-given", "memory-given"],
)
def test_cpu_and_memory_are_requests_and_limits(
    patch: dict[str, Any], expected: dict[str, str]
) -> None:
    resources = _container(_svc({"spec": patch}))["resources"]
    gpus = {"nvidia.com/gpu": str(patch.get("gpu", {}).get("count", 1))}
    assert resources == {"limits": {**expected, **gpus}, "requests": {**expected, **gpus}}


def test_catalog_host_figures_may_be_fractional() -> None:
    catalog = build_gpu_catalog({"H100-80GB": {"cpuPerGPU": 2.5, "hostMemoryGiBPerGPU": 1.5}})
    cfg = OperatorConfig(gpu_catalog=catalog)
    deployment = render_all(_svc(), cfg).manifests[0]
    amounts = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert (amounts["cpu"], amounts["memory"]) == ("2500m", "1536Mi")
