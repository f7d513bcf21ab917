"""Engine flags as `vllm serve` takes them, and their resolution to what vLLM 0.33 would run.

`resolve_config` applies vLLM's hardware-dependent defaults and the cross-field validation vLLM
raises at startup, both from the facts module (vllm_operator.vllm.defaults / .rules), then sizes
the KV cache (memory.py). Error messages are vLLM's own text where the docs quote it.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_operator.sim.engine.memory import (
    auto_max_model_len,
    check_fits_one_request,
    size_kv_cache,
)
from vllm_operator.sim.engine.profiles import GpuProfile, ModelProfile, StepCoefficients
from vllm_operator.vllm import dtypes, flags
from vllm_operator.vllm.defaults import BatchDefaults, batch_defaults
from vllm_operator.vllm.rules import check_limits, resolve_batch_limits

POLICIES = flags.SCHEDULING_POLICY.choices
MODELLED_DTYPES = dtypes.HALF_DTYPES  # the profiles' step times are 16-bit ones
PERFORMANCE_MODES = flags.PERFORMANCE_MODE.choices


@dataclass(frozen=True)
class EngineConfig:
    """The modelled `vllm serve` flags; None means "omitted": vLLM picks its default."""

    max_num_seqs: int | None = None
    max_num_active_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_queued_reqs: int | None = None
    max_num_queued_tokens: int | None = None
    max_model_len: int | None = None  # -1 = "auto": the largest that fits in KV memory
    enable_chunked_prefill: bool | None = None
    enable_prefix_caching: bool | None = None
    scheduling_policy: str = "fcfs"
    gpu_memory_utilization: float = flags.DEFAULT_GPU_MEMORY_UTILIZATION
    long_prefill_token_threshold: int = 0
    async_scheduling: bool | None = None
    tensor_parallel_size: int = 1
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"  # --dtype: what the model runs in (vllm_operator.vllm.dtypes)
    allow_long_max_model_len: bool = False  # VLLM_ALLOW_LONG_MAX_MODEL_LEN (vllm.env)
    block_size: int = 16
    watermark: float = 0.0
    scheduler_reserve_full_isl: bool = True
    performance_mode: str = "balanced"
    served_model_name: str | None = None
    # vLLM flags that replace the memory profile; used by tests to get tiny, exact pools
    num_gpu_blocks_override: int | None = None
    kv_cache_memory_bytes: int | None = None


@dataclass(frozen=True)
class ResolvedConfig:
    """What the engine runs with: every default filled in, plus the KV sizing."""

    max_num_seqs: int
    max_num_active_seqs: int
    max_num_batched_tokens: int
    max_num_queued_reqs: int | None
    max_num_queued_tokens: int | None
    max_model_len: int
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    scheduling_policy: str
    gpu_memory_utilization: float
    long_prefill_token_threshold: int
    async_scheduling: bool
    tensor_parallel_size: int
    kv_cache_dtype: str
    dtype: str  # the torch dtype the model runs in: bfloat16 or float16
    block_size: int
    watermark: float
    scheduler_reserve_full_isl: bool
    performance_mode: str
    served_model_name: str
    num_gpu_blocks: int
    kv_cache_memory_bytes: int  # per GPU
    kv_bytes_per_token: int  # per GPU
    gpu: str
    model: str

    @property
    def kv_cache_size_tokens(self) -> int:
        # vLLM's "GPU KV cache size: N tokens" counts every block, the null block included
        return self.num_gpu_blocks * self.block_size

    @property
    def kv_cache_max_concurrency(self) -> float:
        return self.kv_cache_size_tokens / self.max_model_len


def default_batch_limits(gpu: GpuProfile) -> BatchDefaults:
    """vLLM's (max_num_batched_tokens, max_num_seqs) defaults for `vllm serve` on this device."""
    return batch_defaults(gpu.device_name, gpu.memory_gib)


def _at_least(name: str, value: int | float | None, low: int) -> None:
    if value is not None and value < low:
        raise ValueError(f"{name}: Input should be greater than or equal to {low}")


def _check_ranges(cfg: EngineConfig) -> None:
    # pydantic `ge=` constraints on SchedulerConfig/CacheConfig (docs/vllm-0.33.md §1.4)
    for name in ("max_num_seqs", "max_num_active_seqs", "max_num_batched_tokens"):
        _at_least(name, getattr(cfg, name), 1)
    for name in ("max_num_queued_reqs", "max_num_queued_tokens", "long_prefill_token_threshold"):
        _at_least(name, getattr(cfg, name), 0)
    _at_least("tensor_parallel_size", cfg.tensor_parallel_size, 1)
    _at_least("block_size", cfg.block_size, 1)
    if cfg.max_model_len is not None and cfg.max_model_len != -1:
        _at_least("max_model_len", cfg.max_model_len, 1)
    if not 0 < cfg.gpu_memory_utilization <= 1:
        raise ValueError("gpu_memory_utilization: Input should be greater than 0 and at most 1")
    if not 0 <= cfg.watermark < 1:
        raise ValueError("watermark: Input should be greater than or equal to 0 and less than 1")
    if cfg.scheduling_policy not in POLICIES:
        raise ValueError("scheduling_policy: Input should be 'fcfs' or 'priority'")
    if cfg.performance_mode not in PERFORMANCE_MODES:
        raise ValueError(
            "performance_mode: Input should be 'balanced', 'interactivity' or 'throughput'"
        )


def _check_model_len(cfg: EngineConfig, model: ModelProfile) -> None:
    too_long = cfg.max_model_len is not None and cfg.max_model_len > model.max_model_len
    if too_long and not cfg.allow_long_max_model_len:  # vLLM warns and uses it then
        raise ValueError(
            f"User-specified max_model_len ({cfg.max_model_len}) is greater than the derived "
            f"max_model_len (max_position_embeddings={model.max_model_len} or "
            "model_max_length=None in model's config.json). To allow overriding this maximum, "
            "set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."
        )


def _model_dtype(cfg: EngineConfig, gpu: GpuProfile, model: ModelProfile) -> str:
    """The dtype the model runs in, checked the way vLLM checks it between config and worker."""
    capability = gpu.compute_capability
    dtype = dtypes.resolve_model_dtype(cfg.dtype, model.dtype, capability=capability)
    dtypes.check_kv_cache_dtype(cfg.kv_cache_dtype, dtype)
    dtypes.check_device_dtype(dtype, capability=capability, device_name=gpu.device_name)
    if dtype not in MODELLED_DTYPES:
        raise ValueError(
            f"dtype {dtype!r} is not modelled by the simulator (modelled: "
            f"{', '.join(MODELLED_DTYPES)}): the profiles' step times are 16-bit ones"
        )
    return dtype


def resolve_config(
    cfg: EngineConfig,
    gpu: GpuProfile,
    model: ModelProfile,
    coeffs: StepCoefficients | None = None,
) -> ResolvedConfig:
    """Fill in vLLM's defaults and validate; raises ValueError with vLLM's message."""
    coeffs = coeffs or StepCoefficients()
    _check_ranges(cfg)
    tp = cfg.tensor_parallel_size
    if model.heads % tp:
        raise ValueError(
            f"Total number of attention heads ({model.heads}) must be divisible by tensor "
            f"parallel size ({tp})."
        )
    _check_model_len(cfg, model)
    dtype = _model_dtype(cfg, gpu, model)
    sizing = size_kv_cache(
        gpu,
        model,
        tp=tp,
        gpu_memory_utilization=cfg.gpu_memory_utilization,
        block_size=cfg.block_size,
        kv_cache_dtype=cfg.kv_cache_dtype,
        coeffs=coeffs,
        kv_cache_memory_bytes=cfg.kv_cache_memory_bytes,
        num_gpu_blocks_override=cfg.num_gpu_blocks_override,
    )
    auto_len = cfg.max_model_len == -1
    if cfg.max_model_len is None or auto_len:
        mml = auto_max_model_len(sizing, model, cfg.block_size) if auto_len else model.max_model_len
    else:
        mml = cfg.max_model_len
    chunked = True if cfg.enable_chunked_prefill is None else cfg.enable_chunked_prefill
    limits = resolve_batch_limits(
        cfg.max_num_batched_tokens,
        cfg.max_num_seqs,
        default_batch_limits(gpu),
        max_model_len=mml,
        chunked_prefill=chunked,
        performance_mode=cfg.performance_mode,
    )
    mnbt, seqs = limits.max_num_batched_tokens, limits.max_num_seqs
    active = cfg.max_num_active_seqs if cfg.max_num_active_seqs is not None else seqs
    lpt = cfg.long_prefill_token_threshold
    check_limits(
        limits,
        max_num_active_seqs=active,
        max_model_len=mml,
        chunked_prefill=chunked,
        long_prefill_token_threshold=lpt,
    )
    check_fits_one_request(sizing, mml, cfg.block_size)
    return ResolvedConfig(
        max_num_seqs=seqs,
        max_num_active_seqs=active,
        max_num_batched_tokens=mnbt,
        max_num_queued_reqs=cfg.max_num_queued_reqs,
        max_num_queued_tokens=cfg.max_num_queued_tokens,
        max_model_len=mml,
        enable_chunked_prefill=chunked,
        enable_prefix_caching=(
            True if cfg.enable_prefix_caching is None else cfg.enable_prefix_caching
        ),
        scheduling_policy=cfg.scheduling_policy,
        gpu_memory_utilization=cfg.gpu_memory_utilization,
        long_prefill_token_threshold=lpt,
        async_scheduling=True if cfg.async_scheduling is None else cfg.async_scheduling,
        tensor_parallel_size=tp,
        kv_cache_dtype=cfg.kv_cache_dtype,
        dtype=dtype,
        block_size=cfg.block_size,
        watermark=cfg.watermark,
        scheduler_reserve_full_isl=cfg.scheduler_reserve_full_isl,
        performance_mode=cfg.performance_mode,
        served_model_name=cfg.served_model_name or model.name,
        num_gpu_blocks=sizing.num_gpu_blocks,
        kv_cache_memory_bytes=sizing.available_bytes,
        kv_bytes_per_token=sizing.kv_bytes_per_token,
        gpu=gpu.name,
        model=model.name,
    )
