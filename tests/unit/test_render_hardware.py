from typing import Any

import pytest

from vllm_operator.api.v1alpha1 import VLLMServiceSpec
from vllm_operator.catalog import GPUCatalog
from vllm_operator.render.errors import RenderError
from vllm_operator.render.hardware import check_hardware_defaults
from vllm_operator.vllm.defaults import batch_defaults


@pytest.mark.parametrize(
    ("gpu", "memory", "want"),
    [
        ("H100-80GB", 80, (8192, 1024)),
        ("H200-141GB", 141, (8192, 1024)),
        ("A100-80GB", 80, (2048, 256)),  # A100s are excluded by name (vLLM PR #17885)
        ("MI300X", 192, (16384, 1024)),
        ("L4", 24, (2048, 256)),
    ],
)
def test_batch_defaults_of_catalog_names(gpu: str, memory: float, want: tuple[int, int]) -> None:
    assert batch_defaults(gpu, memory) == want


def spec(gpu: str = "L4", fallbacks: tuple[str, ...] = (), **budgets: Any) -> VLLMServiceSpec:
    return VLLMServiceSpec.model_validate(
        {"model": "m", "gpu": {"type": gpu, "fallbackTypes": list(fallbacks)}, "budgets": budgets}
    )


@pytest.mark.parametrize(
    ("s", "field"),
    [
        (spec(running={"maxSeqs": 4096}), "spec.budgets.running.maxSeqs"),
        (spec(running={"maxActiveSeqs": 300}), "spec.budgets.running.maxActiveSeqs"),
        # the default seqs (1024 on H100) is clamped to a smaller user token budget
        (
            spec("H100-80GB", running={"maxActiveSeqs": 600}, tokens={"maxBatchedTokens": 512}),
            "spec.budgets.running.maxActiveSeqs",
        ),
        # fine on the primary type, refused on a fallback
        (spec("H100-80GB", ("L4",), running={"maxSeqs": 4096}), "spec.budgets.running.maxSeqs"),
    ],
)
def test_refused_like_vllm_would(s: VLLMServiceSpec, field: str) -> None:
    with pytest.raises(RenderError) as err:
        check_hardware_defaults(s, GPUCatalog())
    assert err.value.field == field


@pytest.mark.parametrize(
    "s",
    [
        spec(running={"maxSeqs": 2048}),  # exactly the default token budget
        spec(running={"maxActiveSeqs": 256}),
        spec("H100-80GB", running={"maxSeqs": 4096}),
        spec(running={"maxSeqs": 4096}, tokens={"maxBatchedTokens": 4096}),  # both set: the CRD's
        spec(running={"maxSeqs": 512, "maxActiveSeqs": 300}),
        spec(),
    ],
)
def test_accepted(s: VLLMServiceSpec) -> None:
    check_hardware_defaults(s, GPUCatalog())
