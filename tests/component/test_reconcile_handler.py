"""handlers/reconcile.py against the recording fake API server: what a pass writes, and as whom."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kubernetes.client.exceptions import ApiException

from tests.component.handlers import (
    LOG,
    NAME,
    condition,
    deployment,
    deps_for,
    example,
    roll_out,
    serve,
    service,
)
from tests.support.fake_kube import FakeKube
from vllm_operator import constants as c
from vllm_operator.handlers.reconcile import reconcile

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def test_create_applies_every_child_under_the_renderers_field_manager() -> None:
    kube = FakeKube()
    kube.put(example("minimal.yaml"))
    reconcile(service(kube), deps=deps_for(kube, NOW), logger=LOG)
    children = [a for a in kube.applies if a.kind != c.KIND]
    assert {a.kind for a in children} == {"Deployment", "Service"}
    assert {(a.field_manager, a.subresource) for a in children} == {(c.FM_RENDERER, None)}
    (status,) = kube.applied(c.KIND, manager=c.FM_STATUS, subresource="status")
    assert set(status.obj) == {"apiVersion", "kind", "metadata", "status"}  # status only
    assert condition(service(kube), c.COND_READY)["status"] == "False"
    assert kube.events == []  # pods starting is not news; Ready=True will be
    dep = deployment(kube)
    assert dep["metadata"]["labels"][c.LABEL_SERVICE] == NAME
    effective = service(kube)["status"]["effective"]
    assert effective["args"][0] == "Qwen/Qwen2.5-7B-Instruct"
    # status.effective is the rendering the Deployment carries, image included without spec.image
    template = dep["spec"]["template"]
    assert "image" not in service(kube)["spec"]
    assert effective["image"] == template["spec"]["containers"][0]["image"]
    assert effective["specHash"] == template["metadata"]["labels"][c.LABEL_SPEC_HASH]


def test_a_second_pass_over_an_unchanged_service_writes_nothing() -> None:
    kube = FakeKube()
    deps = deps_for(kube, NOW)
    serve(kube, example("three-layer-budgets.yaml"), deps)
    writes = kube.writes
    reconcile(service(kube), deps=deps, logger=LOG)
    reconcile(service(kube), deps=deps, logger=LOG)
    assert kube.writes == writes


def test_events_only_on_transitions() -> None:
    kube = FakeKube()
    deps = deps_for(kube, NOW)
    serve(kube, example("minimal.yaml"), deps)
    assert [(e["type"], e["reason"]) for e in kube.events] == [("Normal", c.REASON_AVAILABLE)]
    reconcile(service(kube), deps=deps, logger=LOG)
    assert len(kube.events) == 1


def test_render_warnings_are_warning_events_once_per_generation() -> None:
    kube = FakeKube()
    deps = deps_for(kube, NOW)
    both = {"serviceMonitor": True, "podMonitor": True}
    serve(kube, example("minimal.yaml", monitoring=both), deps)
    warned = [e for e in kube.events if e["reason"] == c.REASON_SPEC_WARNING]
    assert [(e["type"], e["message"]) for e in warned] == [
        (
            "Warning",
            "spec.monitoring: serviceMonitor and podMonitor are both on; "
            "Prometheus will scrape every pod twice",
        )
    ]
    reconcile(service(kube), deps=deps, logger=LOG)  # the same generation: said already
    # a new generation says it again; one without the setting does not
    for replicas, expected in ((3, 2), (4, 2)):
        obj = service(kube)
        obj["spec"]["replicas"] = replicas
        if replicas == 4:
            obj["spec"]["monitoring"] = {"serviceMonitor": True}
        kube.put(obj)
        reconcile(service(kube), deps=deps, logger=LOG)
        assert len([e for e in kube.events if e["reason"] == c.REASON_SPEC_WARNING]) == expected


def test_drift_of_a_child_is_repaired_and_only_that_child_applied() -> None:
    kube = FakeKube()
    deps = deps_for(kube, NOW)
    serve(kube, example("minimal.yaml"), deps)
    dep = deployment(kube)
    dep["spec"]["template"]["spec"]["containers"][0]["image"] = "someone/else:latest"
    kube.put(dep)  # kubectl edit
    before = len(kube.applies)
    reconcile(service(kube), deps=deps, logger=LOG)
    repaired = [a for a in kube.applies[before:] if a.kind != c.KIND]
    assert [(a.kind, a.field_manager) for a in repaired] == [("Deployment", c.FM_RENDERER)]
    rendered = repaired[0].obj["spec"]["template"]["spec"]["containers"][0]["image"]
    assert deployment(kube)["spec"]["template"]["spec"]["containers"][0]["image"] == rendered
    assert rendered != "someone/else:latest"
    assert condition(service(kube), c.COND_PROGRESSING)["reason"] == c.REASON_ROLLING_OUT


def test_a_refused_child_is_reported_degraded_and_fails_the_pass() -> None:
    kube = FakeKube()
    kube.put(example("minimal.yaml"))
    kube.refuse("Service", 403, 'services "chat" is forbidden: exceeded quota: services=0')
    with pytest.raises(ApiException):
        reconcile(service(kube), deps=deps_for(kube, NOW), logger=LOG)
    degraded = condition(service(kube), c.COND_DEGRADED)
    assert (degraded["status"], degraded["reason"]) == ("True", c.REASON_APPLY_FAILED)
    assert "(403)" in degraded["message"] and "exceeded quota" in degraded["message"]
    assert ("Warning", c.REASON_APPLY_FAILED) in [(e["type"], e["reason"]) for e in kube.events]
    assert deployment(kube)["metadata"]["name"] == NAME  # the refused Service kept nothing out


def test_the_deployment_is_applied_before_every_other_child() -> None:
    # its pods are what Ready waits for: they start while a Service waits for its ClusterIP
    kube = FakeKube()
    kube.put(example("three-layer-budgets.yaml"))
    reconcile(service(kube), deps=deps_for(kube, NOW), logger=LOG)
    kinds = [a.kind for a in kube.applies if a.kind != c.KIND]
    assert sorted(kinds) == ["Deployment", "Service", "ServiceMonitor"]
    assert kinds[0] == "Deployment"


def test_with_autoscaling_the_tuner_takes_replicas_before_the_renderer_drops_them() -> None:
    kube = FakeKube()
    deps = deps_for(kube, NOW)
    obj = example("autotune-recommend.yaml", replicas=3)
    kube.put(obj)
    reconcile(service(kube), deps=deps, logger=LOG)
    deps_applies = kube.applied("Deployment")
    assert [a.field_manager for a in deps_applies] == [c.FM_RENDERER, c.FM_TUNER]
    assert deps_applies[1].obj["spec"] == {"replicas": 3}  # the tuner's patch: replicas only
    assert "replicas" not in deps_applies[0].obj["spec"]
    dep = deployment(kube)
    assert dep["spec"]["replicas"] == 3
    owners = {m["manager"] for m in dep["metadata"]["managedFields"]
              if "f:replicas" in m["fieldsV1"].get("f:spec", {})}  # fmt: skip
    assert owners == {c.FM_TUNER}
    roll_out(kube)
    before = len(kube.applies)
    reconcile(service(kube), deps=deps, logger=LOG)
    assert [a for a in kube.applies[before:] if a.kind == "Deployment"] == []
    assert deployment(kube)["spec"]["replicas"] == 3


def _pod_on(kube: FakeKube, pod: str, node: str, product: str) -> None:
    kube.put({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": node, "labels": {"nvidia.com/gpu.product": product}}})  # fmt: skip
    kube.put({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": pod, "namespace": "team-a", "labels": {c.LABEL_SERVICE: NAME}},
        "spec": {"nodeName": node}})  # fmt: skip


def test_status_gpu_is_the_type_of_the_nodes_the_pods_got() -> None:
    kube = FakeKube()
    deps = deps_for(kube, NOW)
    fallback = {"type": "H100-80GB", "fallbackTypes": ["A100-80GB"]}
    serve(kube, example("minimal.yaml", gpu=fallback), deps)
    assert "resolvedType" not in service(kube)["status"]["gpu"]  # no pod bound yet
    _pod_on(kube, "chat-1", "a100-0", "NVIDIA-A100-SXM4-80GB")
    reconcile(service(kube), deps=deps, logger=LOG)
    assert service(kube)["status"]["gpu"] == {
        "resolvedType": "A100-80GB", "resourceName": "nvidia.com/gpu", "unknown": False,
    }  # fmt: skip
    # without fallbacks the nodeSelector pins the type
    plain = FakeKube()
    serve(plain, example("minimal.yaml", gpu={"type": "L4"}), deps_for(plain, NOW))
    assert service(plain)["status"]["gpu"]["resolvedType"] == "L4"
