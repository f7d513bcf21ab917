"""Engine flags as `vllm serve` takes them, and their resolution to what vLLM 0.33 would run.

`resolve_config` applies vLLM's hardware-dependent defaults (docs/vllm-0.33.md §1.3),
then the cross-field validation vLLM raises at startup (docs/vllm-0.33.md §1.4), then
sizes the KV cache (memory.py). Error messages are vLLM's own text where the docs quote it.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_operator.sim.engine.memory import (
    auto_max_model_len,
    check_fits_one_request,
    size_kv_cache,
)
from vllm_operator.sim.engine.profiles import GpuProfile, ModelProfile, StepCoefficients

POLICIES = ("fcfs", "priority")
PERFORMANCE_MODES = ("balanced", "interactivity", "throughput")


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
    gpu_memory_utilization: float = 0.92
    long_prefill_token_threshold: int = 0
    async_scheduling: bool | None = None
    tensor_parallel_size: int = 1
    kv_cache_dtype: str = "auto"
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


def default_batch_limits(gpu: GpuProfile) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) of `vllm serve` on this device (§1.3 table)."""
    name = gpu.device_name.lower()
    if gpu.memory_gib >= 160:
        return 16384, 1024
    if gpu.memory_gib >= 70 and "a100" not in name and "gb10" not in name:
        return 8192, 1024
    return 2048, 256


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


def _batch_defaults(
    cfg: EngineConfig, gpu: GpuProfile, max_model_len: int, chunked: bool
) -> tuple[int, int]:
    """§1.3 defaults and post-processing; each step touches only values the user left out."""
    default_mnbt, default_seqs = default_batch_limits(gpu)
    mnbt, seqs = cfg.max_num_batched_tokens, cfg.max_num_seqs
    if cfg.performance_mode == "throughput":  # step 2
        default_mnbt, default_seqs = default_mnbt * 2, default_seqs * 2
    seqs_value = seqs if seqs is not None else default_seqs
    if mnbt is None:
        if not chunked:  # step 3
            default_mnbt = max(max_model_len, default_mnbt)
        mnbt = min(seqs_value * max_model_len, default_mnbt)  # step 4
    if seqs is None:
        seqs = min(default_seqs, mnbt)  # step 5
    return mnbt, seqs


def _validate_scheduler(
    mnbt: int, seqs: int, active: int, mml: int, chunked: bool, lpt: int
) -> None:
    # vllm/config/scheduler.py:317-360, in that order
    if mnbt < mml and not chunked:
        raise ValueError(
            f"max_num_batched_tokens ({mnbt}) is smaller than max_model_len ({mml}). This "
            "effectively limits the maximum sequence length to max_num_batched_tokens and makes "
            "vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease "
            "max_model_len."
        )
    if mnbt < seqs:
        raise ValueError(
            f"max_num_batched_tokens ({mnbt}) must be greater than or equal to max_num_seqs "
            f"({seqs})."
        )
    if active > seqs:
        raise ValueError(
            f"max_num_active_seqs ({active}) cannot be greater than max_num_seqs ({seqs})."
        )
    if lpt > mml:
        raise ValueError(
            f"long_prefill_token_threshold ({lpt}) cannot be greater than the max_model_len "
            f"({mml})."
        )


def _check_model_len(cfg: EngineConfig, model: ModelProfile) -> None:
    if cfg.max_model_len is not None and cfg.max_model_len > model.max_model_len:
        raise ValueError(
            f"User-specified max_model_len ({cfg.max_model_len}) is greater than the derived "
            f"max_model_len (max_position_embeddings={model.max_model_len} or "
            "model_max_length=None in model's config.json). To allow overriding this maximum, "
            "set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."
        )


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
    mnbt, seqs = _batch_defaults(cfg, gpu, mml, chunked)
    active = cfg.max_num_active_seqs if cfg.max_num_active_seqs is not None else seqs
    lpt = cfg.long_prefill_token_threshold
    _validate_scheduler(mnbt, seqs, active, mml, chunked, lpt)
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
