"""Budgets checked against the defaults vLLM 0.33 picks for the GPU when a flag is omitted.

The CRD compares two budget fields only when both are set; vLLM compares a set field with its
own default for the other, and that default depends on the GPU (docs/vllm-0.33.md §1.3). A spec such
as maxSeqs 4096 on an L4 (default max-num-batched-tokens 2048) passes the API server and then
crash-loops at start-up, so the renderer refuses it with the field to fix. Found by the parity
tier (tests/parity), which runs vLLM's own SchedulerConfig.
"""

from __future__ import annotations

from vllm_operator.api.v1alpha1 import VLLMServiceSpec
from vllm_operator.catalog import GPUCatalog
from vllm_operator.render.args import compute_effective_budgets
from vllm_operator.render.errors import RenderError


def vllm_batch_defaults(gpu_type: str, memory_gib: float) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM 0.33 uses for `vllm serve` on this GPU."""
    if memory_gib >= 160:
        return 16384, 1024
    if memory_gib >= 70 and "a100" not in gpu_type.lower():
        return 8192, 1024
    return 2048, 256


def check_hardware_defaults(spec: VLLMServiceSpec, catalog: GPUCatalog) -> None:
    """Raise RenderError when vLLM would refuse the budgets on any acceptable GPU type."""
    budgets = compute_effective_budgets(spec)
    seqs = budgets.get("maxSeqs")
    active = budgets.get("maxActiveSeqs")
    batched = budgets.get("maxBatchedTokens")
    engine = spec.engine
    chunked = engine.enable_chunked_prefill if engine else None
    model_len = engine.max_model_len if engine else None
    for gpu_type in (spec.gpu.type, *spec.gpu.fallback_types):
        entry = catalog.get(gpu_type)
        if entry is None:
            continue  # placement reports unknown types
        default_batched, default_seqs = vllm_batch_defaults(gpu_type, entry.memory_gib)
        if chunked is False and model_len is not None:
            default_batched = max(default_batched, model_len)  # §1.3 post-processing step 3
        eff_batched = batched if batched is not None else default_batched
        if seqs is not None and batched is None and seqs > eff_batched:
            raise RenderError(
                "spec.budgets.running.maxSeqs",
                f"{seqs} is above vLLM 0.33's default max-num-batched-tokens on {gpu_type} "
                f"({eff_batched}), which vLLM refuses at start-up; set "
                f"spec.budgets.tokens.maxBatchedTokens >= {seqs} or lower maxSeqs",
            )
        # an omitted max-num-seqs defaults per GPU and is clamped to the token budget (step 5)
        eff_seqs = seqs if seqs is not None else min(default_seqs, eff_batched)
        if active is not None and seqs is None and active > eff_seqs:
            raise RenderError(
                "spec.budgets.running.maxActiveSeqs",
                f"{active} is above vLLM 0.33's default max-num-seqs on {gpu_type} ({eff_seqs}), "
                f"which vLLM refuses at start-up; set spec.budgets.running.maxSeqs >= {active} "
                "or lower maxActiveSeqs",
            )
