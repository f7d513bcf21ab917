"""Rendered child manifests: Deployment, Service, monitors, templates."""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

import pytest

from tests.unit.render_support import CFG
from tests.unit.render_support import by_kind as _by_kind
from tests.unit.render_support import container as _container
from tests.unit.render_support import pod as _pod
from tests.unit.render_support import svc as _svc
from vllm_operator.api.status import BudgetValues
from vllm_operator.config import load_operator_config
from vllm_operator.render import (
    TemplateOutputError,
    build_selector_string,
    render_all,
)

TEMPLATES = Path(__file__).resolve().parents[2] / "operator" / "vllm_operator" / "templates"
LABELS = {
    "app.kubernetes.io/name": "vllm",
    "app.kubernetes.io/instance": "chat",
    "app.kubernetes.io/component": "server",
    "app.kubernetes.io/managed-by": "vllm-operator",
    "serving.vllmop.io/vllmservice": "chat",
}
META = {"name": "chat", "namespace": "llm", "labels": LABELS}
SELECTOR = {"serving.vllmop.io/vllmservice": "chat"}


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
                # one replica: a surge pod, never zero serving (render/rollout.py)
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {"labels": {**LABELS, "serving.vllmop.io/spec-hash": spec_hash}},
                "spec": {
                    # the preStop sleep, --shutdown-timeout and vLLM's teardown
                    "terminationGracePeriodSeconds": 80,
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
                                "--shutdown-timeout",
                                "60",
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
                            "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
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
    target_labels = [
        "serving.vllmop.io/vllmservice",
        "app.kubernetes.io/instance",
        "serving.vllmop.io/canary",  # only canary pods carry it (tuning/canary.py)
    ]
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
    targets = set(kinds["ServiceMonitor"]["spec"]["podTargetLabels"])
    assert targets - {"serving.vllmop.io/canary"} <= pod_labels.keys()  # a stable pod's
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
                "engine": {
                    "extraArgs": ["--disable_log_stats"],
                    "env": [
                        {"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"},
                        {"name": "VLLM_ATTENTON_BACKEND", "value": "FLASHINFER"},
                        {"name": "MY_VLLM_X", "value": "1"},
                    ],
                },
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
        "spec.engine.env[1]: VLLM_ATTENTON_BACKEND is not one of vLLM 0.33's environment "
        "variables, so it changes nothing (vLLM only logs it); check the spelling",
        "spec.engine.extraArgs: --disable-log-stats turns off the metrics "
        "that autotune and autoscaling read",
    ]
    assert render_all(_svc(), CFG).warnings == []
    assert build_selector_string(svc) == "serving.vllmop.io/vllmservice=chat"


def test_every_template_value_passes_through_tojson() -> None:
    templates = sorted(TEMPLATES.glob("*.j2"))
    assert [t.name for t in templates] == [
        "deployment.yaml.j2",
        "networkpolicy.yaml.j2",
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


def test_a_rendering_again_is_a_fresh_object_equal_to_the_first() -> None:
    # the parsed text is kept (render/templates.py); a caller changing its copy changes no other
    first = _by_kind(_svc())
    first["Deployment"]["spec"]["template"]["metadata"]["labels"]["x"] = "changed"
    first["Service"]["spec"]["ports"].clear()
    again = _by_kind(_svc())
    assert "x" not in again["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert again["Service"]["spec"]["ports"]


def test_a_custom_template_that_json_cannot_carry_is_parsed_as_yaml(tmp_path: Path) -> None:
    # a number as a key and a date: YAML's own values, not those of a JSON round trip
    text = (TEMPLATES / "service.yaml.j2").read_text(encoding="utf-8")
    (tmp_path / "service.yaml.j2").write_text(text + "extra:\n  8000: port\n  since: 2026-12-01\n")
    cfg = load_operator_config({"VLLM_OPERATOR_TEMPLATE_DIR": str(tmp_path)})
    for _ in range(2):  # parsed, then parsed again (not kept)
        extra = _by_kind(_svc(), cfg)["Service"]["extra"]
        assert extra == {8000: "port", "since": datetime.date(2026, 12, 1)}
