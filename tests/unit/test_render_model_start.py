"""The renderer refuses what vLLM's start-up refuses against the model (dtypes, context length,
attention heads) exactly where it would, as far as the engine profiles let it know; the twin
(which models vLLM's start-up) is the cross-check."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.render_support import CFG, svc
from vllm_operator.api.v1alpha1 import VLLMServiceSpec
from vllm_operator.render import render_all
from vllm_operator.render.errors import RenderError
from vllm_operator.render.model_start import check_model_start
from vllm_operator.sim.catalog import packaged_catalog
from vllm_operator.sim.engine.config import EngineConfig, resolve_config
from vllm_operator.vllm import dtypes

PROFILES = packaged_catalog()
BF16_MODEL = "meta-llama/Llama-3.2-3B-Instruct"  # a bfloat16 checkpoint with a profile


def spec(
    kv: str | None = None,
    extra: tuple[str, ...] = (),
    gpu: str = "L4",
    fallbacks: tuple[str, ...] = (),
    model: str = BF16_MODEL,
    count: int = 1,
    **engine_fields: Any,
) -> VLLMServiceSpec:
    engine: dict[str, Any] = {"extraArgs": list(extra), **engine_fields}
    if kv is not None:
        engine["kvCacheDtype"] = kv
    return VLLMServiceSpec.model_validate(
        {
            "model": model,
            "gpu": {"type": gpu, "fallbackTypes": list(fallbacks), "count": count},
            "engine": engine,
        }
    )


def refusal(s: VLLMServiceSpec) -> RenderError | None:
    try:
        check_model_start(s, PROFILES)
    except RenderError as exc:
        return exc
    return None


@pytest.mark.parametrize(
    ("s", "field", "words"),
    [
        # a bfloat16 checkpoint runs in bfloat16 on L4: a float16 cache is refused
        (spec("float16"), "spec.engine.kvCacheDtype", "set kvCacheDtype to auto or bfloat16"),
        # ... and in float16 on a T4 (no bfloat16 below compute capability 8.0)
        (spec("bfloat16", gpu="T4"), "spec.engine.kvCacheDtype", "auto or float16"),
        # fine on the primary type, refused on a fallback
        (spec("bfloat16", gpu="L4", fallbacks=("T4",)), "spec.engine.kvCacheDtype", "on T4"),
        # an explicit --dtype decides, whatever the model
        (
            spec("float16", ("--dtype=bfloat16",), model="org/no-profile"),
            "spec.engine.kvCacheDtype",
            "--dtype in spec.engine.extraArgs[0]",
        ),
        (spec("bfloat16", ("--dtype", "float32")), "spec.engine.kvCacheDtype", "to auto"),
        # the last --dtype wins, as in argparse; a prefix of --dtype is --dtype
        (
            spec("float16", ("--dtype", "half", "--dty", "bfloat16")),
            "spec.engine.kvCacheDtype",
            "extraArgs[3]",
        ),
        (spec(None, ("--dtype", "bfloat16"), gpu="T4"), "spec.engine.extraArgs[1]", "T4"),
    ],
)
def test_refused_like_vllm_would(s: VLLMServiceSpec, field: str, words: str) -> None:
    found = refusal(s)
    assert found is not None
    assert found.field == field
    assert words in str(found)
    assert "\n" not in str(found)


@pytest.mark.parametrize(
    "s",
    [
        spec(),
        spec("auto"),
        spec("fp8"),
        spec("bfloat16"),
        spec("float16", gpu="T4"),  # `auto` runs the bfloat16 checkpoint in float16 there
        spec("float16", ("--dtype", "half")),
        spec("float16", ("--dtype", "auto"), gpu="T4"),
        spec("float16", ("--dtype", "float16"), gpu="T4", fallbacks=("L4",)),
        # not known here, so not refused: a model without a profile, a GPU type without one,
        # extraArgs that can change what the checkpoint says
        spec("float16", model="org/no-profile"),
        spec("float16", gpu="RTX-6000-Ada-custom"),
        spec("float16", ("--quantization", "fp8")),
        spec("float16", ("--hf-overrides", '{"torch_dtype": "float16"}')),
    ],
)
def test_accepted_where_vllm_starts_or_nothing_is_known(s: VLLMServiceSpec) -> None:
    assert refusal(s) is None


def test_render_all_refuses_with_the_field() -> None:
    with pytest.raises(RenderError) as err:
        render_all(svc({"spec": {"engine": {"kvCacheDtype": "float16"}}}), CFG)
    assert err.value.field == "spec.engine.kvCacheDtype"


DTYPE_FLAGS = [None, *dtypes.MODEL_DTYPES]
CACHE_DTYPES = ["auto", "float16", "bfloat16", "fp8"]
MODELS = ["Qwen/Qwen2.5-0.5B-Instruct", BF16_MODEL]  # small enough for every GPU profile


@settings(max_examples=150, deadline=None)
@given(
    kv=st.sampled_from(CACHE_DTYPES),
    flag=st.sampled_from(DTYPE_FLAGS),
    gpu=st.sampled_from(sorted(PROFILES.gpus)),
    model=st.sampled_from(MODELS),
)
def test_refuses_exactly_where_the_twin_would_not_start(
    kv: str, flag: str | None, gpu: str, model: str
) -> None:
    extra = () if flag is None else ("--dtype", flag)
    ours = refusal(spec(kv, extra, gpu=gpu, model=model))
    profile = PROFILES.model(model)
    cfg = EngineConfig(kv_cache_dtype=kv, dtype=flag or "auto", max_model_len=4096)
    try:
        resolve_config(cfg, PROFILES.gpu(gpu), profile, PROFILES.coefficients)
        twin = None
    except ValueError as exc:
        twin = str(exc)
    if twin is not None and "not modelled" in twin:
        return  # float32: vLLM runs it, the twin's step times are 16-bit ones
    assert (ours is None) == (twin is None), (ours, twin)


CONTEXT = PROFILES.model(BF16_MODEL).max_model_len


@pytest.mark.parametrize(
    ("s", "field", "words"),
    [
        (spec(maxModelLen=CONTEXT + 1), "spec.engine.maxModelLen", f"context length ({CONTEXT}"),
        (
            spec(
                maxModelLen=CONTEXT * 2,
                env=[{"name": "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "value": "0"}],
            ),
            "spec.engine.maxModelLen",
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
        ),
        # Llama 3.2 3B has 24 attention heads: 16 GPUs in one pod do not divide them
        (spec(gpu="H100-80GB", count=16), "spec.gpu.count", "does not divide"),
        (spec(gpu="H100-80GB", count=5), "spec.gpu.count", "use one of 1, 2, 3, 4, 6, 8"),
        (
            spec(gpu="H100-80GB", count=10, tensorParallelSize=5, pipelineParallelSize=2),
            "spec.engine.tensorParallelSize",
            "tensor parallel size 5",
        ),
    ],
)
def test_context_and_heads_refused_like_vllm(s: VLLMServiceSpec, field: str, words: str) -> None:
    found = refusal(s)
    assert found is not None and found.field == field and words in str(found), found


@pytest.mark.parametrize(
    "s",
    [
        spec(maxModelLen=CONTEXT),
        spec(
            maxModelLen=CONTEXT + 1, env=[{"name": "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "value": "1"}]
        ),
        spec(
            maxModelLen=CONTEXT + 1,
            env=[{"name": "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "value": " True "}],
        ),
        spec(
            maxModelLen=CONTEXT + 1,
            env=[
                {
                    "name": "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
                    "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}},
                }
            ],
        ),
        spec(maxModelLen=10**7, model="org/no-profile"),
        spec(
            maxModelLen=CONTEXT + 1, extra=("--hf-overrides", '{"max_position_embeddings": 262144}')
        ),
        spec(gpu="H100-80GB", count=8),
        spec(gpu="H100-80GB", count=3),
        spec(gpu="H100-80GB", count=16, model="org/no-profile"),
    ],
)
def test_context_and_heads_accepted_where_vllm_starts_or_nothing_is_known(
    s: VLLMServiceSpec,
) -> None:
    assert refusal(s) is None


@settings(max_examples=100, deadline=None)
@given(
    tp=st.integers(1, 16),
    extra_len=st.integers(-2, 2),
    model=st.sampled_from(MODELS),
)
def test_heads_and_context_refused_exactly_where_the_twin_would_not_start(
    tp: int, extra_len: int, model: str
) -> None:
    profile = PROFILES.model(model)
    length = profile.max_model_len + extra_len
    ours = refusal(spec(gpu="H100-80GB", count=tp, model=model, maxModelLen=length))
    cfg = EngineConfig(max_model_len=length, tensor_parallel_size=tp)
    try:
        resolve_config(cfg, PROFILES.gpu("H100-80GB"), profile, PROFILES.coefficients)
        twin = None
    except ValueError as exc:
        twin = str(exc)
    if twin is not None and not ("heads" in twin or "max_model_len" in twin):
        return  # the twin's own limits (memory for the context): not start-up rules of vLLM's
    assert (ours is None) == (twin is None), (ours, twin)


SEVENTY_B = "meta-llama/Llama-3.1-70B-Instruct"  # 131 GiB of weights


@pytest.mark.parametrize(
    ("s", "field"),
    [
        (spec(gpu="L4", model=SEVENTY_B), "spec.gpu.count"),
        (spec(gpu="H100-80GB", count=1, model=SEVENTY_B), "spec.gpu.count"),
        # fine on the primary type, not on a fallback
        (spec(gpu="H100-80GB", count=2, fallbacks=("L40S",), model=SEVENTY_B), "spec.gpu.count"),
        (
            spec(gpu="A100-40GB", model="Qwen/Qwen3-14B", gpuMemoryUtilization=0.5),
            "spec.engine.gpuMemoryUtilization",
        ),
        # --kv-cache-memory-bytes skips the profile, not the GPU's size
        (
            spec(gpu="T4", model="Qwen/Qwen3-14B", extra=("--kv-cache-memory-bytes", "1G")),
            "spec.gpu.count",
        ),
    ],
)
def test_weights_past_what_vllm_may_use_are_refused(s: VLLMServiceSpec, field: str) -> None:
    found = refusal(s)
    assert found is not None and found.field == field, found
    assert "so it cannot start" in str(found)


@pytest.mark.parametrize(
    "s",
    [
        spec(gpu="H100-80GB", count=2, model=SEVENTY_B),
        spec(
            gpu="H100-80GB", count=4, model=SEVENTY_B, pipelineParallelSize=2, tensorParallelSize=2
        ),
        spec(gpu="L4", model=SEVENTY_B, extra=("--cpu-offload-gb", "120")),
        spec(gpu="L4", model=SEVENTY_B, extra=("--quantization", "fp8")),
        spec(gpu="A100-40GB", model="Qwen/Qwen3-14B"),
        spec(gpu="RTX-6000-Ada-custom", model=SEVENTY_B),
    ],
)
def test_weights_that_fit_or_cannot_be_known_are_accepted(s: VLLMServiceSpec) -> None:
    assert refusal(s) is None


@settings(max_examples=120, deadline=None)
@given(
    gpu=st.sampled_from(sorted(PROFILES.gpus)),
    model=st.sampled_from(sorted({m.aliases[0] for m in PROFILES.models.values() if m.aliases})),
    count=st.sampled_from([1, 2, 4, 8]),
    utilization=st.sampled_from([None, 0.3, 0.6, 0.92, 1.0]),
)
def test_a_weights_refusal_is_one_the_twin_makes_too(
    gpu: str, model: str, count: int, utilization: float | None
) -> None:
    """The renderer counts only the weights, so where it refuses, the twin's fuller memory model
    (weights, activations, the rest) refuses too; the twin may refuse more, nearer the line."""
    fields: dict[str, Any] = {} if utilization is None else {"gpuMemoryUtilization": utilization}
    s = spec(gpu=gpu, count=count, model=model, maxModelLen=1024, **fields)
    ours = refusal(s)
    if ours is None or "weights" not in str(ours):
        return
    cfg = EngineConfig(
        max_model_len=1024,
        tensor_parallel_size=count,
        gpu_memory_utilization=0.92 if utilization is None else utilization,
    )
    with pytest.raises(ValueError):
        resolve_config(cfg, PROFILES.gpu(gpu), PROFILES.model(model), PROFILES.coefficients)
