"""What vLLM 0.33.0 does with the batch limits at start-up: fill in defaults, then refuse.

`resolve_batch_limits` is EngineArgs._set_default_max_num_seqs_and_batched_tokens_args
(vllm/engine/arg_utils.py): each step touches only a value the user left out. `check_limits` is
SchedulerConfig's cross-field validation (vllm/config/scheduler.py), in vLLM's order and with its
messages. The renderer (render/hardware.py) and the engine model (sim/engine/config.py) both call
these; the parity tier compares them with vLLM's own SchedulerConfig.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from vllm_operator.vllm.defaults import BatchDefaults


class Broken(enum.Enum):
    BATCHED_BELOW_MODEL_LEN = "batched_below_model_len"
    BATCHED_BELOW_SEQS = "batched_below_seqs"
    ACTIVE_ABOVE_SEQS = "active_above_seqs"
    THRESHOLD_ABOVE_MODEL_LEN = "threshold_above_model_len"


class SchedulerLimitError(ValueError):
    """SchedulerConfig refuses the limits; str() is vLLM's message, `broken` says which rule."""

    def __init__(self, broken: Broken, message: str) -> None:
        super().__init__(message)
        self.broken = broken


@dataclass(frozen=True)
class BatchLimits:
    max_num_batched_tokens: int
    max_num_seqs: int


def resolve_batch_limits(
    max_num_batched_tokens: int | None,
    max_num_seqs: int | None,
    defaults: BatchDefaults,
    *,
    max_model_len: int | None,
    chunked_prefill: bool,
    performance_mode: str = "balanced",
) -> BatchLimits:
    """The limits vLLM runs with. `max_model_len` None (not known, as in the renderer) skips the
    two steps that need it; neither changes whether check_limits refuses a seqs/batched pair."""
    default_batched, default_seqs = defaults.max_num_batched_tokens, defaults.max_num_seqs
    if performance_mode == "throughput":  # doubles the hardware defaults
        default_batched, default_seqs = default_batched * 2, default_seqs * 2
    seqs_value = max_num_seqs if max_num_seqs is not None else default_seqs
    batched = max_num_batched_tokens
    if batched is None:
        if not chunked_prefill and max_model_len is not None:
            default_batched = max(max_model_len, default_batched)
        batched = default_batched
        if max_model_len is not None:
            batched = min(seqs_value * max_model_len, batched)
    seqs = max_num_seqs if max_num_seqs is not None else min(default_seqs, batched)
    return BatchLimits(batched, seqs)


def check_limits(
    limits: BatchLimits,
    *,
    max_num_active_seqs: int | None,
    max_model_len: int | None,
    chunked_prefill: bool,
    long_prefill_token_threshold: int = 0,
) -> None:
    """Raise SchedulerLimitError as SchedulerConfig would; rules on max_model_len need it known."""
    batched, seqs = limits.max_num_batched_tokens, limits.max_num_seqs
    active = seqs if max_num_active_seqs is None else max_num_active_seqs
    if max_model_len is not None and batched < max_model_len and not chunked_prefill:
        raise SchedulerLimitError(
            Broken.BATCHED_BELOW_MODEL_LEN,
            f"max_num_batched_tokens ({batched}) is smaller than max_model_len "
            f"({max_model_len}). This effectively limits the maximum sequence length to "
            "max_num_batched_tokens and makes vLLM reject longer sequences. Please increase "
            "max_num_batched_tokens or decrease max_model_len.",
        )
    if batched < seqs:
        raise SchedulerLimitError(
            Broken.BATCHED_BELOW_SEQS,
            f"max_num_batched_tokens ({batched}) must be greater than or equal to max_num_seqs "
            f"({seqs}).",
        )
    if active > seqs:
        raise SchedulerLimitError(
            Broken.ACTIVE_ABOVE_SEQS,
            f"max_num_active_seqs ({active}) cannot be greater than max_num_seqs ({seqs}).",
        )
    if max_model_len is not None and long_prefill_token_threshold > max_model_len:
        raise SchedulerLimitError(
            Broken.THRESHOLD_ABOVE_MODEL_LEN,
            f"long_prefill_token_threshold ({long_prefill_token_threshold}) cannot be greater "
            f"than the max_model_len ({max_model_len}).",
        )
