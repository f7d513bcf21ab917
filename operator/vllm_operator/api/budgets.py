"""The budget knobs of vLLM's three concurrency layers: one table, and the models made from it.

A row of BUDGET_FIELDS is one budget: its spec group and wire name, its vLLM flag, its `kubectl
explain` text. From the table come the spec.budgets.<group> models, spec.autotune.bounds,
BudgetValues (status.effective.budgets, status.tuning.overrides and the renderer's overrides),
the flags that extraArgs may not repeat, the args the renderer emits and the keys the tuner
moves. Adding a budget is a row here plus a BudgetKey member; its field and behaviour in the
engine model (sim/engine/config.py, which may not import the API) is the only other source edit;
then regenerate crds/ and docs (gen_crds, gen_docs). tests/unit/test_budget_table.py checks every
mirror that cannot be generated (the engine model, the twin's parsers, the CRD) against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import Field, create_model
from pydantic.alias_generators import to_snake

from vllm_operator.api.base import SpecModel, StatusModel
from vllm_operator.vllm import flags as vf

# Budget fields by their wire names; mypy checks every row's key against this list.
BudgetKey = Literal[
    "maxRequests", "maxPrefillTokens", "maxSeqs", "maxActiveSeqs", "maxBatchedTokens"
]

_VLLM_DEFAULT: Final = "Omitted = vLLM's own default (the flag is not passed)."
_QUEUE_MIN: Final = (
    "At least 1: vLLM accepts 0 but then refuses every request with 503; "
    "omit the field for no limit."
)


@dataclass(frozen=True)
class BudgetField:
    key: BudgetKey  # wire name inside its group, also the key in bounds/overrides/status
    group: str  # spec.budgets.<group>
    flag: str  # vLLM 0.33 flag
    about: str  # the spec field's description: `kubectl explain` text
    human_readable: bool = False  # 8k/8K suffixes, vllm/engine/arg_utils.py human_readable_int
    minimum: int = 1  # lowest value the spec accepts

    @property
    def attr(self) -> str:
        """Python attribute name on every generated model."""
        return to_snake(self.key)

    @property
    def dest(self) -> str:
        """argparse's dest for the flag: vLLM's EngineArgs field, and the engine model's."""
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def spec_path(self) -> str:
        return f"spec.budgets.{self.label}"

    @property
    def label(self) -> str:
        """The field as decisions, events and metrics name it: `queue.maxRequests`."""
        return f"{self.group}.{self.key}"


# Order = the README's three layers (entry valve, running layer, token budget); args follow it.
BUDGET_FIELDS: Final[tuple[BudgetField, ...]] = (
    BudgetField(
        "maxRequests",
        "queue",
        vf.MAX_NUM_QUEUED_REQS.flag,
        "Entry valve: requests in flight (waiting + running) per replica beyond which the "
        f"server answers 503 ({vf.MAX_NUM_QUEUED_REQS.flag}). {_QUEUE_MIN}",
    ),
    BudgetField(
        "maxPrefillTokens",
        "queue",
        vf.MAX_NUM_QUEUED_TOKENS.flag,
        "Entry valve: prompt tokens still in prefill per replica beyond which the server "
        f"answers 503 ({vf.MAX_NUM_QUEUED_TOKENS.flag}). {_QUEUE_MIN}",
        human_readable=True,
    ),
    BudgetField(
        "maxSeqs",
        "running",
        vf.MAX_NUM_SEQS.flag,
        "Runner capacity in sequences per engine step; sizes buffers and CUDA graphs "
        f"({vf.MAX_NUM_SEQS.flag}). Changing it invalidates the compile cache. {_VLLM_DEFAULT}",
    ),
    BudgetField(
        "maxActiveSeqs",
        "running",
        vf.MAX_NUM_ACTIVE_SEQS.flag,
        "How many requests may be RUNNING at once; must be <= maxSeqs "
        f"({vf.MAX_NUM_ACTIVE_SEQS.flag}). {_VLLM_DEFAULT}",
    ),
    BudgetField(
        "maxBatchedTokens",
        "tokens",
        vf.MAX_NUM_BATCHED_TOKENS.flag,
        "Tokens per engine step, prefill and decode together "
        f"({vf.MAX_NUM_BATCHED_TOKENS.flag}). Must be >= maxSeqs. {_VLLM_DEFAULT}",
        human_readable=True,
    ),
)
BUDGET_KEYS: Final = tuple(f.key for f in BUDGET_FIELDS)
BUDGETS_BY_KEY: Final = {f.key: f for f in BUDGET_FIELDS}


def budget_change(key: BudgetKey, before: int | None, after: int | None) -> str:
    """A change of one budget as decisions and Events name it: `queue.maxRequests 8 -> 32`
    (`unset` where the spec leaves it to vLLM)."""
    was, now = ("unset" if v is None else str(v) for v in (before, after))
    return f"{BUDGETS_BY_KEY[key].label} {was} -> {now}"


class Bound(SpecModel):
    min: int | None = Field(default=None, ge=1, description="Lowest value the tuner may set.")
    max: int | None = Field(default=None, ge=1, description="Highest value the tuner may set.")


# What mypy sees of the generated models: their fields exist only at run time, so code reads
# them through the table (getattr with BudgetField.attr) or BudgetValuesModel.get.
class BudgetGroupModel(SpecModel):
    pass


class BudgetBoundsModel(SpecModel):
    pass


class BudgetValuesModel(StatusModel):
    def get(self, key: BudgetKey) -> int | None:
        value = getattr(self, BUDGETS_BY_KEY[key].attr)
        return None if value is None else int(value)


def _model(name: str, base: type[Any], fields: dict[str, Any], doc: str | None = None) -> Any:
    return create_model(name, __base__=base, __module__=__name__, __doc__=doc, **fields)


def _group_model(group: str, name: str) -> Any:
    fields = {
        f.attr: (int | None, Field(default=None, ge=f.minimum, description=f.about))
        for f in BUDGET_FIELDS
        if f.group == group
    }
    return _model(name, BudgetGroupModel, fields)


def _bounds_model() -> Any:
    fields = {
        f.attr: (
            Bound | None,
            Field(
                default=None,
                description=f"Range the tuner may move budgets {f.group}.{f.key} within.",
            ),
        )
        for f in BUDGET_FIELDS
    }
    return _model("AutotuneBounds", BudgetBoundsModel, fields)


def _values_model() -> Any:
    fields = {
        f.attr: (int | None, Field(default=None, description=f"{f.flag}.")) for f in BUDGET_FIELDS
    }
    doc = "Values of the budget fields; an absent field means vLLM's own default."
    return _model("BudgetValues", BudgetValuesModel, fields, doc)


if TYPE_CHECKING:
    QueueBudgets = BudgetGroupModel
    RunningBudgets = BudgetGroupModel
    TokenBudgets = BudgetGroupModel
    AutotuneBounds = BudgetBoundsModel
    BudgetValues = BudgetValuesModel
else:
    QueueBudgets = _group_model("queue", "QueueBudgets")
    RunningBudgets = _group_model("running", "RunningBudgets")
    TokenBudgets = _group_model("tokens", "TokenBudgets")
    AutotuneBounds = _bounds_model()
    BudgetValues = _values_model()
