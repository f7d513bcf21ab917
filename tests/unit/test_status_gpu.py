"""status.gpu: the type the pods got, from the nodes they are bound to when fallbacks exist."""

from __future__ import annotations

from vllm_operator.api.spec import GPUSpec
from vllm_operator.catalog import GPUCatalog
from vllm_operator.status.gpu import bound_nodes, summarize_gpu

CATALOG = GPUCatalog()
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "kubernetes.io/os": "linux"}
A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
L4 = {"nvidia.com/gpu.product": "NVIDIA-L4"}


def test_without_fallbacks_the_node_selector_pins_the_type_and_nothing_is_read() -> None:
    got = summarize_gpu(GPUSpec(type="L4"), CATALOG, None)
    assert got == {"resourceName": "nvidia.com/gpu", "unknown": False, "resolvedType": "L4"}


def test_with_fallbacks_the_nodes_labels_say_which_type() -> None:
    gpu = GPUSpec(type="H100-80GB", fallback_types=["A100-80GB"])
    assert summarize_gpu(gpu, CATALOG, [A100])["resolvedType"] == "A100-80GB"
    # pods split over types: all of them, most preferred first, whatever the node order
    assert summarize_gpu(gpu, CATALOG, [A100, H100, A100])["resolvedType"] == "H100-80GB,A100-80GB"
    # no pod bound yet, or only to nodes of no acceptable type: not known, so not said
    assert "resolvedType" not in summarize_gpu(gpu, CATALOG, [])
    assert "resolvedType" not in summarize_gpu(gpu, CATALOG, [L4])
    assert "resolvedType" not in summarize_gpu(gpu, CATALOG, None)


def test_an_unknown_type_is_flagged() -> None:
    assert summarize_gpu(GPUSpec(type="B300"), CATALOG, None) == {"unknown": True}


def test_bound_nodes_skip_pending_pods_and_repeat_none() -> None:
    pods = [
        {"spec": {"nodeName": "b"}},
        {"spec": {}},
        {"spec": {"nodeName": "a"}},
        {"spec": {"nodeName": "b"}},
    ]
    assert bound_nodes(pods) == ["a", "b"]
