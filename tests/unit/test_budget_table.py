"""Every mirror of the budget table (api/budgets.py) that is not generated from it agrees with it.

The spec groups, autotune bounds, BudgetValues, owned flags and args come from the table. What
cannot (the engine model, which may not import the API; the twin's parsers; the tuner's typed
keys; the committed CRD) is checked here, row by row, so a new budget that misses one fails.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml

from vllm_operator.api import rules
from vllm_operator.api.budgets import (
    BUDGET_FIELDS,
    BUDGET_KEYS,
    AutotuneBounds,
    BudgetField,
    BudgetKey,
    BudgetValues,
)
from vllm_operator.api.crd import CRD_FILENAME
from vllm_operator.api.spec import Budgets, VLLMServiceSpec
from vllm_operator.render import build_args
from vllm_operator.sim.engine.config import EngineConfig, ResolvedConfig
from vllm_operator.tuning import model as tuning_model
from vllm_twin.argv import engine_config_from, parse_vllm_argv
from vllm_twin.commands import simulate

ROOT = Path(__file__).resolve().parents[2]
ROWS = pytest.mark.parametrize("row", BUDGET_FIELDS, ids=lambda row: row.key)


def _crd_schema() -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "crds" / CRD_FILENAME).read_text(encoding="utf-8"))
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _node(schema: dict[str, Any], *path: str) -> dict[str, Any]:
    for name in path:
        schema = schema["properties"][name]
    return schema


def test_the_table_has_one_row_per_key_and_flag() -> None:
    assert len(set(BUDGET_KEYS)) == len(BUDGET_FIELDS)
    assert len({row.flag for row in BUDGET_FIELDS}) == len(BUDGET_FIELDS)
    assert len({row.attr for row in BUDGET_FIELDS}) == len(BUDGET_FIELDS)


def test_the_tuners_keys_are_the_tables() -> None:
    assert get_args(BudgetKey) == BUDGET_KEYS
    assert tuning_model.BudgetKey is BudgetKey


def test_the_spec_groups_are_the_tables() -> None:
    # Budgets is written by hand (a group is structure); each group's fields come from the table.
    assert set(Budgets.model_fields) == {row.group for row in BUDGET_FIELDS}
    for group, info in Budgets.model_fields.items():
        model = get_args(info.annotation)[0]
        assert list(model.model_fields) == [r.attr for r in BUDGET_FIELDS if r.group == group]
    assert list(AutotuneBounds.model_fields) == [row.attr for row in BUDGET_FIELDS]
    assert list(BudgetValues.model_fields) == [row.attr for row in BUDGET_FIELDS]


@ROWS
def test_the_crd_schema_carries_the_row(row: BudgetField) -> None:
    schema = _crd_schema()
    spec_field = _node(schema, "spec", "budgets", row.group, row.key)
    assert spec_field == {
        "type": "integer",
        "minimum": row.minimum,
        "description": row.about,
    }
    bounds = _node(schema, "spec", "autotune", "bounds", row.key)
    assert (
        bounds["description"] == f"Range the tuner may move budgets {row.group}.{row.key} within."
    )
    for where in (("effective", "budgets"), ("tuning", "overrides")):
        value = _node(schema, "status", *where, row.key)
        assert value == {"type": "integer", "description": f"{row.flag}."}


def test_the_crd_schema_has_no_budget_the_table_lacks() -> None:
    schema = _crd_schema()
    groups = _node(schema, "spec", "budgets")["properties"]
    in_crd = {(group, key) for group, node in groups.items() for key in node["properties"]}
    assert in_crd == {(row.group, row.key) for row in BUDGET_FIELDS}
    assert set(_node(schema, "spec", "autotune", "bounds")["properties"]) == set(BUDGET_KEYS)
    assert set(_node(schema, "status", "effective", "budgets")["properties"]) == set(BUDGET_KEYS)
    assert set(_node(schema, "status", "tuning", "overrides")["properties"]) == set(BUDGET_KEYS)


@ROWS
def test_extra_args_may_not_repeat_the_rows_flag(row: BudgetField) -> None:
    owned = [f for f in rules.OWNED_FLAGS if f.flag == row.flag]
    assert [f.message(2, row.flag) for f in owned] == [
        f'spec.engine.extraArgs[2]: "{row.flag}" is vLLM\'s {row.flag}, which {row.spec_path} owns'
    ]


@ROWS
def test_the_renderer_passes_the_row_as_its_flag(row: BudgetField) -> None:
    spec = VLLMServiceSpec.model_validate(
        {"model": "m", "gpu": {"type": "H100-80GB"}, "budgets": {row.group: {row.key: 7}}}
    )
    args = build_args(spec)
    assert args[args.index(row.flag) + 1] == "7"


@ROWS
def test_the_engine_model_has_the_row(row: BudgetField) -> None:
    fields = {f.name: f for f in dataclasses.fields(EngineConfig)}
    assert row.dest in fields, f"sim/engine/config.py: EngineConfig has no field {row.dest}"
    assert fields[row.dest].default is None  # omitted = vLLM's default, as in the spec
    assert row.dest in {f.name for f in dataclasses.fields(ResolvedConfig)}


@ROWS
def test_the_twins_vllm_serve_parser_takes_the_row(row: BudgetField) -> None:
    engine = parse_vllm_argv(["m", row.flag, "8"], {}).engine
    assert getattr(engine, row.dest) == 8
    underscored = "--" + row.flag.removeprefix("--").replace("-", "_")
    assert getattr(parse_vllm_argv(["m", f"{underscored}=9"], {}).engine, row.dest) == 9


@ROWS
def test_the_simulate_command_takes_the_row(row: BudgetField) -> None:
    parser = argparse.ArgumentParser()
    simulate.add_arguments(parser)
    action = next(a for a in parser._actions if row.flag in a.option_strings)
    assert action.dest == row.dest
    # its flags map onto EngineConfig by name; a row it forgets would silently be dropped
    engine = engine_config_from(parser.parse_args([row.flag, "8"]))
    assert getattr(engine, row.dest) == 8


@ROWS
def test_human_readable_values_parse_where_vllm_takes_them(row: BudgetField) -> None:
    argv = ["m", row.flag, "2k"]
    if row.human_readable:
        assert getattr(parse_vllm_argv(argv, {}).engine, row.dest) == 2000
    else:
        with pytest.raises(Exception, match=row.flag):
            parse_vllm_argv(argv, {})
