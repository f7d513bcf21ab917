"""Placement and resources of rendered pods: GPUs, fallback types, shared memory, CPU, memory."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.render_support import CFG
from tests.unit.render_support import container as _container
from tests.unit.render_support import pod as _pod
from tests.unit.render_support import svc as _svc
from vllm_operator.catalog import build_gpu_catalog
from vllm_operator.config import OperatorConfig, load_operator_config
from vllm_operator.render import (
    RenderError,
    UnknownGPUTypeError,
    render_all,
)


@pytest.mark.parametrize(("count", "shm"), [(1, "2Gi"), (2, "4Gi"), (4, "8Gi"), (8, "16Gi")])
def test_shared_memory_scales_with_gpus(count: int, shm: str) -> None:
    # a model whose 32 attention heads every count divides (vLLM's start-up rule)
    gpu = {"type": "H100-80GB", "count": count}
    pod = _pod(_svc({"spec": {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": gpu}}))
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
