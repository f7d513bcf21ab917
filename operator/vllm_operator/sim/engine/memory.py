"""KV-cache sizing: the blocks vLLM 0.33 ends up with on a GPU (docs/vllm-0.33-scheduler.md §2.5).

available_kv = ceil(total * gpu_memory_utilization) - weights/TP - activations - non-torch
num_blocks   = available_kv // bytes_per_block

Activation and non-torch memory come from the model profile and the calibration constants
(docs/twin-calibration.md §2.2). CUDA-graph memory is not modelled: its size is not in vLLM's
source (docs/vllm-0.33-scheduler.md §9). The startup check that one `max_model_len` request
fits is vLLM's `check_enough_kv_cache_memory`, with its message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vllm_operator.sim.engine.profiles import GIB, GpuProfile, ModelProfile, StepCoefficients
from vllm_operator.vllm.dtypes import HALF_DTYPES

# dtype name -> bytes per element; "auto"/bf16/fp16 follow the model's dtype
KV_DTYPE_BYTES = {"fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}
MODEL_DTYPE_NAMES = ("auto", *HALF_DTYPES)


@dataclass(frozen=True)
class KvSizing:
    available_bytes: int  # KV budget per GPU
    bytes_per_block: int  # per GPU (this rank's KV heads)
    num_gpu_blocks: int
    kv_bytes_per_token: int  # per GPU


def kv_dtype_bytes(kv_cache_dtype: str, model: ModelProfile) -> int:
    if kv_cache_dtype in MODEL_DTYPE_NAMES:
        return model.dtype_bytes
    if kv_cache_dtype in KV_DTYPE_BYTES:
        return KV_DTYPE_BYTES[kv_cache_dtype]
    modelled = ", ".join((*MODEL_DTYPE_NAMES, *KV_DTYPE_BYTES))
    raise ValueError(
        f"kv_cache_dtype {kv_cache_dtype!r} is not modelled by the simulator (modelled: {modelled})"
    )


def kv_heads_per_rank(model: ModelProfile, tp: int) -> int:
    # vLLM replicates KV heads when TP exceeds their number, so each rank holds at least one
    return max(1, model.kv_heads // tp)


def size_kv_cache(
    gpu: GpuProfile,
    model: ModelProfile,
    *,
    tp: int,
    gpu_memory_utilization: float,
    block_size: int,
    kv_cache_dtype: str,
    coeffs: StepCoefficients,
    kv_cache_memory_bytes: int | None = None,
    num_gpu_blocks_override: int | None = None,
) -> KvSizing:
    dtype_bytes = kv_dtype_bytes(kv_cache_dtype, model)
    per_token = 2 * model.layers * kv_heads_per_rank(model, tp) * model.head_dim * dtype_bytes
    bytes_per_block = per_token * block_size
    if kv_cache_memory_bytes is not None:
        available = kv_cache_memory_bytes  # replaces the whole profile (§2.5 step 4)
    else:
        requested = math.ceil(gpu.memory_bytes * gpu_memory_utilization)
        nontorch = coeffs.nontorch_gib_tp1 if tp == 1 else coeffs.nontorch_gib_tp
        overhead = (model.activation_gib + nontorch) * GIB
        available = int(requested - model.weight_bytes / tp - overhead)
    if available <= 0:
        raise ValueError(
            "No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."
        )
    blocks = available // bytes_per_block
    if num_gpu_blocks_override is not None:
        blocks = num_gpu_blocks_override
    return KvSizing(available, bytes_per_block, blocks, per_token)


def check_fits_one_request(sizing: KvSizing, max_model_len: int, block_size: int) -> None:
    """vLLM refuses to start unless the KV cache holds one `max_model_len` sequence."""
    needed = -(-max_model_len // block_size) * sizing.bytes_per_block
    available = sizing.available_bytes
    if needed <= available:
        return
    estimated = (available // sizing.bytes_per_block) * block_size
    estimated_msg = (
        f"Based on the available memory, the estimated maximum model length is {estimated}."
        if estimated > 0
        else ""
    )
    raise ValueError(
        f"To serve at least one request with the model's max seq len ({max_model_len}), "
        f"({needed / GIB:.2f} GiB KV cache is needed, which is larger than the available KV "
        f"cache memory ({available / GIB:.2f} GiB). {estimated_msg} Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    )


def auto_max_model_len(sizing: KvSizing, model: ModelProfile, block_size: int) -> int:
    """`--max-model-len auto`/-1: the largest length whose KV fits, capped by the model."""
    return min(model.max_model_len, (sizing.available_bytes // sizing.bytes_per_block) * block_size)
