"""The starting point of the search: each layer sized from what it means (docs/planning.md).

- running layer (max-num-seqs): the most sequences whose decode step, at the workload's mean
  context, still fits the ITL target, and whose KV the cache holds;
- token budget (max-num-batched-tokens): the 90th-percentile prompt in one step, unless a step
  that large (a prefill chunk beside a full decode batch) would break the ITL target;
- entry valve (max-num-queued-tokens): the prefill tokens the GPU clears within the TTFT target
  (TTFT budget x prefill throughput, as vLLM's docs size --max-num-queued-tokens), and
  max-num-queued-reqs the running seats plus the prompts of that backlog;
- replicas: the arrival rate over a replica's capacity at that batch, at 70% utilisation.
Prefill throughput and step times come from the engine model's step-time model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vllm_operator.planning.candidate import Target
from vllm_operator.planning.workload import Stats
from vllm_operator.sim.engine import ResolvedConfig
from vllm_operator.sim.engine.steptime import StepTimeModel

SEQ_GRID = (8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
TOKEN_STEP = 512
KV_FILL = 0.9  # share of the KV cache the running layer may plan to fill
UTILISATION = 0.7


@dataclass(frozen=True)
class Start:
    max_num_seqs: int
    max_num_batched_tokens: int
    max_num_queued_tokens: int
    max_num_queued_reqs: int
    replicas: int
    prefill_tokens_per_s: float
    why: tuple[str, ...]


def _round_up(value: float, step: int) -> int:
    return max(step, math.ceil(value / step) * step)


def prefill_rate(timer: StepTimeModel, tokens: int) -> float:
    """Prompt tokens per second of a step that prefills `tokens` from scratch."""
    return tokens / timer.duration(1, tokens, 0, tokens, tokens * (tokens + 1), 0)


def _mixed_step(timer: StepTimeModel, seqs: int, budget: int, ctx: float) -> float:
    """A step of one prefill chunk filling `budget` beside seqs-1 decodes at context `ctx`."""
    decodes = max(seqs - 1, 0)
    chunk = max(budget - decodes, 1)
    dctx = round(decodes * ctx)
    return timer.duration(
        decodes + 1, chunk, decodes, dctx + chunk, chunk * (chunk + 1), 2 * dctx + 2 * decodes
    )


def derive_start(
    stats: Stats, defaults: ResolvedConfig, timer: StepTimeModel, target: Target
) -> Start:
    ttft_limit, itl_limit, _ = target.limits()
    ctx = stats.prompt_mean + stats.output_mean / 2
    why: list[str] = []
    kv_seqs = max(1, int(defaults.kv_cache_size_tokens * KV_FILL / max(ctx, 1.0)))
    seqs = min(defaults.max_num_seqs, kv_seqs)
    if itl_limit is not None:
        fits = [s for s in SEQ_GRID if timer.decode_duration(s, round(s * ctx)) <= itl_limit]
        seqs = min(seqs, fits[-1] if fits else SEQ_GRID[0])
        why.append(f"max_num_seqs {seqs}: the largest decode batch within ITL {itl_limit:.3f}s")
    else:
        why.append(f"max_num_seqs {seqs}: vLLM's default, within the KV cache")
    budget = max(_round_up(stats.prompt_p90, TOKEN_STEP), seqs)
    if itl_limit is not None:
        while budget > TOKEN_STEP and _mixed_step(timer, seqs, budget, ctx) > itl_limit:
            budget -= TOKEN_STEP
    else:
        budget = max(budget, defaults.max_num_batched_tokens)
    budget = max(budget, seqs)
    why.append(f"max_num_batched_tokens {budget}: p90 prompt {stats.prompt_p90}, ITL-bounded")
    rate = prefill_rate(timer, budget)
    queued_tokens = _round_up(ttft_limit * rate, 256)
    queued_reqs = seqs + math.ceil(queued_tokens / max(stats.prompt_mean, 1.0))
    why.append(
        f"max_num_queued_tokens {queued_tokens}: TTFT {ttft_limit:.3f}s x prefill {rate:.0f} tok/s"
    )
    decode = timer.decode_duration(seqs, round(seqs * ctx))
    per_request = stats.prompt_mean / rate + stats.output_mean * decode / seqs
    capacity = 1 / per_request
    replicas = max(1, math.ceil(stats.rate / (UTILISATION * capacity))) if stats.rate else 1
    why.append(f"replicas {replicas}: {stats.rate:.2f} req/s over {capacity:.2f} req/s each")
    return Start(seqs, budget, queued_tokens, queued_reqs, replicas, rate, tuple(why))
