"""The dtype a model runs in and the KV-cache dtypes vLLM 0.33 takes with it (vllm/dtypes.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vllm_operator.sim.engine import EngineConfig, ResolvedConfig, resolve_config
from vllm_operator.sim.engine.profiles import ProfileError, gpu_from_mapping, model_from_mapping
from vllm_operator.vllm.dtypes import (
    KV_CACHE_DTYPES,
    MODEL_DTYPES,
    check_kv_cache_dtype,
    resolve_model_dtype,
)

from .helpers import CATALOG

LLAMA3B = CATALOG.model("Llama-3.2-3B")


def _resolve(gpu: str, **flags: Any) -> ResolvedConfig:
    # 4096 tokens of context fit every catalog GPU's KV cache
    return resolve_config(EngineConfig(max_model_len=4096, **flags), CATALOG.gpu(gpu), LLAMA3B)


def test_auto_runs_the_checkpoint_dtype_where_the_gpu_has_it() -> None:
    assert _resolve("L4").dtype == "bfloat16"
    assert _resolve("H100-80GB", dtype="half").dtype == "float16"
    # Turing has no bfloat16: vLLM falls back to float16 (vllm/config/model.py)
    assert _resolve("T4").dtype == "float16"


@pytest.mark.parametrize(
    ("gpu", "flags", "message"),
    [
        (
            "L4",
            {"kv_cache_dtype": "float16"},
            'kv_cache_dtype="float16" is incompatible with dtype="bfloat16". '
            "Please set `--kv-cache-dtype` to `auto` or `bfloat16`.",
        ),
        (
            "T4",
            {"kv_cache_dtype": "bfloat16"},
            'kv_cache_dtype="bfloat16" is incompatible with dtype="float16". '
            "Please set `--kv-cache-dtype` to `auto` or `float16`.",
        ),
        (
            "T4",
            {"dtype": "bfloat16"},
            "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your "
            "Tesla T4 GPU has compute capability 7.5. You can use float16 instead by explicitly "
            "setting the `dtype` flag in CLI, for example: --dtype=half.",
        ),
        ("L4", {"kv_cache_dtype": "fp9"}, "Invalid kv_cache_dtype: 'fp9'. Valid values are: ["),
        ("L4", {"dtype": "float32"}, "dtype 'float32' is not modelled by the simulator"),
        ("L4", {"kv_cache_dtype": "nvfp4"}, "kv_cache_dtype 'nvfp4' is not modelled"),
    ],
)
def test_refused_at_start_up_with_vllms_message(
    gpu: str, flags: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        _resolve(gpu, **flags)


def test_matching_float_kv_dtype_is_the_auto_pool() -> None:
    assert _resolve("L4", kv_cache_dtype="bfloat16").num_gpu_blocks == _resolve("L4").num_gpu_blocks
    half = _resolve("L4", dtype="float16", kv_cache_dtype="float16")
    assert half.num_gpu_blocks == _resolve("L4").num_gpu_blocks


@given(
    flag=st.sampled_from(MODEL_DTYPES),
    checkpoint=st.sampled_from(("bfloat16", "float16", "float32")),
    capability=st.sampled_from((None, "7.0", "7.5", "8.0", "8.9", "9.0", "10.0")),
    cache=st.sampled_from(KV_CACHE_DTYPES) | st.text(max_size=12),
)
def test_the_rules_agree_with_each_other(
    flag: str, checkpoint: str, capability: str | None, cache: str
) -> None:
    dtype = resolve_model_dtype(flag, checkpoint, capability=capability)
    assert dtype in ("bfloat16", "float16", "float32")
    if flag == "auto" and capability in ("7.0", "7.5"):
        assert dtype != "bfloat16"  # auto never picks what the device lacks
    try:
        check_kv_cache_dtype(cache, dtype)
    except ValueError as exc:
        assert str(exc).count("\n") == 0
        # refused: unknown, or an explicit 16-bit float other than the model's
        assert cache not in KV_CACHE_DTYPES or (cache in ("float16", "bfloat16") and cache != dtype)
    else:
        assert cache in KV_CACHE_DTYPES and cache not in ({"float16", "bfloat16"} - {dtype})


def test_profiles_refuse_a_bad_capability_or_dtype() -> None:
    gpu = {
        "device_name": "X",
        "memory_gib": 80,
        "bandwidth_tbps": 2,
        "tflops": 300,
        "interconnect_gbps": 100,
        "allreduce_latency_us": 10,
    }
    assert gpu_from_mapping("X", {**gpu, "compute_capability": "8.9"}).compute_capability == "8.9"
    with pytest.raises(ProfileError, match=r"gpu 'X': compute_capability is MAJOR\.MINOR"):
        gpu_from_mapping("X", {**gpu, "compute_capability": 8.9})
    raw = {k: getattr(LLAMA3B, k) for k in ("params", "params_nonemb", "layers", "hidden")}
    raw |= {k: getattr(LLAMA3B, k) for k in ("heads", "kv_heads", "head_dim", "vocab")}
    raw |= {k: getattr(LLAMA3B, k) for k in ("dtype_bytes", "weight_bytes", "kv_bytes_per_token")}
    raw |= {"max_model_len": LLAMA3B.max_model_len, "activation_gib": LLAMA3B.activation_gib}
    assert model_from_mapping("M", {**raw, "dtype": "float16"}).dtype == "float16"
    with pytest.raises(ProfileError, match="model 'M': dtype must be one of bfloat16, float16"):
        model_from_mapping("M", {**raw, "dtype": "float32"})
