"""The engine's gauges and counters, the `vllm:*` sources (docs/vllm-0.33-scheduler.md §6)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class EngineStats:
    # gauges, as of the last completed step (§6.1)
    num_running: int
    num_waiting: int
    waiting_by_reason: Mapping[str, int]  # capacity, deferred
    kv_usage: float  # 0-1
    num_gpu_blocks: int
    kv_cache_size_tokens: int
    # counters, cumulative (§6.2)
    preemptions: int
    prompt_tokens: int
    generation_tokens: int
    prefix_cache_queries: int
    prefix_cache_hits: int
    rejections: Mapping[str, int]  # by reason
    request_success: Mapping[str, int]  # by finished_reason
    # tokens of each output batch since the previous stats() call (iteration_tokens_total)
    iteration_tokens: tuple[int, ...]
    # extras for the virtual-time runner
    num_steps: int = 0
    kv_usage_peak: float = 0.0
    kv_usage_seconds: float = 0.0  # integral of kv_usage over engine time
    frontend_unfinished: int = 0  # what max_num_queued_reqs compares against
    frontend_prefill_tokens: int = 0  # what max_num_queued_tokens compares against
