"""vLLM 0.33's defaults per hardware and its startup validation (docs/vllm-0.33.md §1.3, §1.4)."""

from __future__ import annotations

import pytest

from vllm_operator.sim.engine import EngineConfig, resolve_config
from vllm_operator.sim.engine.config import default_batch_limits

from .helpers import CATALOG, LLAMA8

LLAMA3B = CATALOG.model("Llama-3.2-3B")


@pytest.mark.parametrize(
    ("gpu", "expected"),
    [
        ("H100-80GB", (8192, 1024)),
        ("H200-141GB", (8192, 1024)),
        ("MI300X", (16384, 1024)),  # >= 160 GiB tier by memory
        ("A100-80GB", (2048, 256)),  # >= 70 GiB but the name says a100
        ("A100-40GB", (2048, 256)),
        ("L40S", (2048, 256)),
        ("L4", (2048, 256)),
        ("T4", (2048, 256)),
    ],
)
def test_hardware_default_table(gpu: str, expected: tuple[int, int]) -> None:
    assert default_batch_limits(CATALOG.gpu(gpu)) == expected


def _resolve(gpu: str = "H100-80GB", model: str = "Llama-3.1-8B", **flags: object) -> object:
    return resolve_config(EngineConfig(**flags), CATALOG.gpu(gpu), CATALOG.model(model))  # type: ignore[arg-type]


def test_defaults_h100_and_l4() -> None:
    h100 = resolve_config(EngineConfig(), CATALOG.gpu("H100-80GB"), LLAMA8)
    assert (h100.max_num_batched_tokens, h100.max_num_seqs, h100.max_num_active_seqs) == (
        8192,
        1024,
        1024,
    )
    assert (h100.enable_chunked_prefill, h100.enable_prefix_caching, h100.async_scheduling) == (
        True,
        True,
        True,
    )
    assert h100.max_model_len == 131072  # the model's derived maximum
    l4 = resolve_config(EngineConfig(max_model_len=8192), CATALOG.gpu("L4"), LLAMA3B)
    assert (l4.max_num_batched_tokens, l4.max_num_seqs) == (2048, 256)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        # step 2: throughput mode doubles both defaults
        ({"performance_mode": "throughput"}, (16384, 2048)),
        # step 3: chunked prefill off raises the budget to max_model_len
        ({"enable_chunked_prefill": False, "max_model_len": 16384}, (16384, 1024)),
        # step 4: the budget never exceeds max_num_seqs * max_model_len
        ({"max_num_seqs": 2, "max_model_len": 1024}, (2048, 2)),
        # step 5: max_num_seqs never exceeds the budget (so no validation error)
        ({"max_num_batched_tokens": 512}, (512, 512)),
        # user values are kept as given
        ({"max_num_batched_tokens": 4096, "max_num_seqs": 64}, (4096, 64)),
    ],
)
def test_default_post_processing(flags: dict[str, object], expected: tuple[int, int]) -> None:
    res = resolve_config(EngineConfig(**flags), CATALOG.gpu("H100-80GB"), LLAMA8)  # type: ignore[arg-type]
    assert (res.max_num_batched_tokens, res.max_num_seqs) == expected


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            {"max_num_batched_tokens": 512, "max_num_seqs": 1024},
            "max_num_batched_tokens (512) must be greater than or equal to max_num_seqs (1024).",
        ),
        (
            {"max_num_seqs": 4, "max_num_active_seqs": 8},
            "max_num_active_seqs (8) cannot be greater than max_num_seqs (4).",
        ),
        (
            {
                "enable_chunked_prefill": False,
                "max_num_batched_tokens": 4096,
                "max_model_len": 8192,
            },
            "max_num_batched_tokens (4096) is smaller than max_model_len (8192). This "
            "effectively limits the maximum sequence length to max_num_batched_tokens and "
            "makes vLLM reject longer sequences. Please increase max_num_batched_tokens or "
            "decrease max_model_len.",
        ),
        (
            {"long_prefill_token_threshold": 10000, "max_model_len": 8192},
            "long_prefill_token_threshold (10000) cannot be greater than the max_model_len (8192).",
        ),
        ({"max_num_seqs": 0}, "max_num_seqs: Input should be greater than or equal to 1"),
        ({"watermark": 1.0}, "watermark: Input should be greater than or equal to 0 and less"),
        ({"scheduling_policy": "lifo"}, "scheduling_policy: Input should be 'fcfs' or"),
    ],
)
def test_startup_validation_errors(flags: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as err:
        resolve_config(EngineConfig(**flags), CATALOG.gpu("H100-80GB"), LLAMA8)  # type: ignore[arg-type]
    assert str(err.value).startswith(message)


def test_kv_cache_must_hold_one_max_model_len_request() -> None:
    # Llama-3.1-8B on an L4 leaves ~3.6 GiB of KV: vLLM refuses its 131072-token default
    with pytest.raises(ValueError) as err:
        resolve_config(EngineConfig(), CATALOG.gpu("L4"), LLAMA8)
    text = str(err.value)
    assert text.startswith(
        "To serve at least one request with the model's max seq len (131072), (16.00 GiB KV "
        "cache is needed, which is larger than the available KV cache memory ("
    )
    assert "Based on the available memory, the estimated maximum model length is " in text
    assert text.endswith(
        "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine."
    )
    # the estimate it prints is itself a length that starts
    estimate = int(text.split("maximum model length is ")[1].split(".")[0])
    ok = resolve_config(EngineConfig(max_model_len=estimate), CATALOG.gpu("L4"), LLAMA8)
    assert ok.kv_cache_size_tokens >= estimate


def test_other_startup_errors() -> None:
    with pytest.raises(ValueError, match=r"Total number of attention heads \(28\) must be "):
        resolve_config(
            EngineConfig(tensor_parallel_size=8),
            CATALOG.gpu("H100-80GB"),
            CATALOG.model("Qwen2.5-7B"),
        )
    with pytest.raises(ValueError, match=r"User-specified max_model_len \(65536\) is greater"):
        resolve_config(
            EngineConfig(max_model_len=65536), CATALOG.gpu("H100-80GB"), CATALOG.model("Qwen2.5-7B")
        )
    with pytest.raises(ValueError, match="No available memory for the cache blocks"):
        resolve_config(EngineConfig(), CATALOG.gpu("H100-80GB"), CATALOG.model("Llama-3.1-70B"))


def test_auto_max_model_len_and_tensor_parallel_kv() -> None:
    auto = resolve_config(EngineConfig(max_model_len=-1), CATALOG.gpu("L4"), LLAMA8)
    assert auto.max_model_len == auto.kv_cache_memory_bytes // (131072 * 16) * 16
    seventy = CATALOG.model("Llama-3.1-70B")
    tp2 = resolve_config(
        EngineConfig(tensor_parallel_size=2, max_model_len=8192), CATALOG.gpu("H100-80GB"), seventy
    )
    # each rank holds half the KV heads, so a token costs half as much per GPU
    assert tp2.kv_bytes_per_token == seventy.kv_bytes_per_token // 2
    assert tp2.kv_cache_size_tokens == tp2.num_gpu_blocks * 16


def test_fp8_kv_cache_doubles_capacity() -> None:
    gpu = CATALOG.gpu("H100-80GB")
    bf16 = resolve_config(EngineConfig(), gpu, LLAMA8)
    fp8 = resolve_config(EngineConfig(kv_cache_dtype="fp8"), gpu, LLAMA8)
    assert fp8.num_gpu_blocks == pytest.approx(2 * bf16.num_gpu_blocks, abs=1)
    with pytest.raises(ValueError, match="not modelled"):
        resolve_config(EngineConfig(kv_cache_dtype="nvfp4"), gpu, LLAMA8)
