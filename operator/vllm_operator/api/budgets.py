"""The five budget knobs: one table ties a field's wire name to its group, flag and spec path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from vllm_operator.api import flags


@dataclass(frozen=True)
class BudgetField:
    key: str  # wire name inside its group, also the key in bounds/overrides/status
    attr: str  # Python attribute name
    group: str  # spec.budgets.<group>
    flag: str  # vLLM 0.33 flag

    @property
    def spec_path(self) -> str:
        return f"spec.budgets.{self.group}.{self.key}"


# Order = the README's three layers (entry valve, running layer, token budget); args follow it.
BUDGET_FIELDS: Final[tuple[BudgetField, ...]] = (
    BudgetField("maxRequests", "max_requests", "queue", flags.FLAG_MAX_QUEUED_REQS),
    BudgetField("maxPrefillTokens", "max_prefill_tokens", "queue", flags.FLAG_MAX_QUEUED_TOKENS),
    BudgetField("maxSeqs", "max_seqs", "running", flags.FLAG_MAX_SEQS),
    BudgetField("maxActiveSeqs", "max_active_seqs", "running", flags.FLAG_MAX_ACTIVE_SEQS),
    BudgetField("maxBatchedTokens", "max_batched_tokens", "tokens", flags.FLAG_MAX_BATCHED_TOKENS),
)
BUDGET_KEYS: Final = tuple(f.key for f in BUDGET_FIELDS)
