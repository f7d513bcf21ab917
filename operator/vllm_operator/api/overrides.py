"""Tuning overrides: values the tuner puts in force over spec, without ever writing spec."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from vllm_operator.api.budgets import BUDGET_FIELDS
from vllm_operator.api.status import BudgetValues


class TuningOverrides(BaseModel):
    """Replicas and budget values that replace the spec's in the rendered Deployment."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    replicas: int | None = Field(default=None, ge=0)
    max_requests: int | None = Field(default=None, ge=1)
    max_prefill_tokens: int | None = Field(default=None, ge=1)
    max_seqs: int | None = Field(default=None, ge=1)
    max_active_seqs: int | None = Field(default=None, ge=1)
    max_batched_tokens: int | None = Field(default=None, ge=1)

    def budget_values(self) -> BudgetValues:
        return BudgetValues(**{f.attr: getattr(self, f.attr) for f in BUDGET_FIELDS})

    @classmethod
    def from_budget_values(
        cls, values: BudgetValues | None, replicas: int | None = None
    ) -> TuningOverrides:
        """Overrides as status.tuning.overrides records them (e.g. after an operator restart)."""
        budgets = {} if values is None else {f.attr: getattr(values, f.attr) for f in BUDGET_FIELDS}
        return cls(replicas=replicas, **budgets)
