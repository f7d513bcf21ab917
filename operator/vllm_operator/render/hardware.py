"""Budgets checked against the defaults vLLM 0.33 picks for the GPU when a flag is omitted.

The CRD compares two budget fields only when both are set; vLLM compares a set field with its
own default for the other, and that default depends on the GPU (vllm_operator.vllm.defaults). A
spec such as maxSeqs 4096 on an L4 (default max-num-batched-tokens 2048) passes the API server
and then crash-loops at start-up, so the renderer refuses it with the field to fix. The defaults
and the rules are vLLM's (vllm_operator.vllm.rules), proven by the parity tier (tests/parity).
"""

from __future__ import annotations

from vllm_operator.api.v1alpha1 import VLLMServiceSpec
from vllm_operator.catalog import GPUCatalog
from vllm_operator.render.args import compute_effective_budgets
from vllm_operator.render.errors import RenderError
from vllm_operator.vllm.defaults import batch_defaults
from vllm_operator.vllm.rules import (
    BatchLimits,
    Broken,
    SchedulerLimitError,
    check_limits,
    resolve_batch_limits,
)


def check_hardware_defaults(spec: VLLMServiceSpec, catalog: GPUCatalog) -> None:
    """Raise RenderError when vLLM would refuse the budgets on any acceptable GPU type."""
    budgets = compute_effective_budgets(spec)
    seqs = budgets.get("maxSeqs")
    active = budgets.get("maxActiveSeqs")
    batched = budgets.get("maxBatchedTokens")
    engine = spec.engine
    chunked = engine.enable_chunked_prefill is not False if engine else True
    model_len = engine.max_model_len if engine else None
    for gpu_type in spec.gpu.acceptable_types:
        entry = catalog.get(gpu_type)
        if entry is None:
            continue  # placement reports unknown types
        limits = resolve_batch_limits(
            batched,
            seqs,
            batch_defaults(gpu_type, entry.memory_gib),
            max_model_len=model_len,
            chunked_prefill=chunked,
        )
        try:
            # the model's own context length is unknown here: rules that need it are the CRD's
            check_limits(
                limits, max_num_active_seqs=active, max_model_len=None, chunked_prefill=chunked
            )
        except SchedulerLimitError as exc:
            raise _field_error(exc, gpu_type, limits, seqs, active) from None


def _field_error(
    exc: SchedulerLimitError,
    gpu_type: str,
    limits: BatchLimits,
    seqs: int | None,
    active: int | None,
) -> RenderError:
    # both fields set is a CRD rule already; here one of them is vLLM's default
    if exc.broken is Broken.BATCHED_BELOW_SEQS:
        return RenderError(
            "spec.budgets.running.maxSeqs",
            f"{seqs} is above vLLM 0.33's default max-num-batched-tokens on {gpu_type} "
            f"({limits.max_num_batched_tokens}), which vLLM refuses at start-up; set "
            f"spec.budgets.tokens.maxBatchedTokens >= {seqs} or lower maxSeqs",
        )
    return RenderError(
        "spec.budgets.running.maxActiveSeqs",
        f"{active} is above vLLM 0.33's default max-num-seqs on {gpu_type} "
        f"({limits.max_num_seqs}), which vLLM refuses at start-up; set "
        f"spec.budgets.running.maxSeqs >= {active} or lower maxActiveSeqs",
    )
