"""vLLM 0.33's facts (vllm_operator.vllm) agree with the option list generated from vLLM's parser.

The parity tier proves options.json, the value parsers and the token resolution against vLLM
itself (tests/parity/test_vllm_facts.py); here every table row is checked against options.json.
"""

from __future__ import annotations

import dataclasses

import pytest

from vllm_operator.sim.engine.config import EngineConfig
from vllm_operator.vllm import flags as vf
from vllm_operator.vllm.defaults import batch_defaults
from vllm_operator.vllm.numbers import FlagValueError, human_readable_int_or_auto
from vllm_operator.vllm.options import load_option_table, resolve_token
from vllm_operator.vllm.rules import Broken, SchedulerLimitError, check_limits, resolve_batch_limits

TABLE = load_option_table()
ACTIONS = {
    vf.Kind.BOOL: {"EnableDisableAction", "BooleanOptionalAction"},
    vf.Kind.STORE_TRUE: {"_StoreTrueAction"},
}


@pytest.mark.parametrize("flag", vf.FLAGS, ids=lambda f: f.flag)
def test_every_row_is_one_vllm_option_with_its_dest_spellings_and_default(
    flag: vf.VllmFlag,
) -> None:
    option = TABLE.by_string[flag.flag]
    assert option.dest == flag.dest
    assert set(flag.spellings) <= set(option.strings)
    # the row names every spelling vLLM accepts for this option
    assert set(option.strings) == set(flag.spellings)
    assert option.default == flag.default
    assert option.action in ACTIONS.get(flag.kind, {"_StoreAction"})
    if flag.kind is vf.Kind.CHOICE:
        assert set(option.choices or ()) == set(flag.choices)
    if flag.kind is vf.Kind.NAMES:
        assert option.nargs == "+"
    if flag.kind is vf.Kind.OPTIONAL_STR:
        assert option.nargs == "?"
    if flag.kind in (vf.Kind.HUMAN_INT, vf.Kind.HUMAN_INT_OR_AUTO):
        assert option.type in ("human_readable_int", "human_readable_int_or_auto", "_optional_type")


def test_the_option_list_is_vllm_0_33() -> None:
    assert TABLE.vllm == "0.33.0"
    assert len(TABLE.by_string) == sum(len(o.strings) for o in TABLE.options)  # no string twice


@pytest.mark.parametrize("knob", vf.NOT_IN_VLLM)
def test_knobs_not_in_vllm_resolve_to_no_option(knob: str) -> None:
    assert resolve_token(knob).unknown


def test_engine_config_defaults_are_vllms() -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(EngineConfig)}
    for flag in vf.FLAGS:
        if flag.dest in defaults and flag.default is not None:
            assert defaults[flag.dest] == flag.default, flag.flag


@pytest.mark.parametrize(
    ("text", "value"), [("auto", -1), ("AUTO", -1), ("-1", -1), (" 4k ", 4000), ("-2", -2)]
)
def test_max_model_len_syntax(text: str, value: int) -> None:
    assert human_readable_int_or_auto(text) == value


def test_binary_suffix_refuses_a_fraction_like_vllm() -> None:
    with pytest.raises(FlagValueError, match=r"Did you mean to use 1\.5k"):
        human_readable_int_or_auto("1.5K")


@pytest.mark.parametrize(
    ("name", "memory", "capability", "want"),
    [
        ("NVIDIA H100 80GB HBM3", 79.65, (9, 0), (8192, 1024)),
        ("NVIDIA H200", 140.4, (9, 0), (8192, 1024)),
        ("NVIDIA B200", 180, (10, 0), (16384, 1024)),
        ("NVIDIA A100-SXM4-80GB", 79.15, (8, 0), (2048, 256)),
        ("NVIDIA GB10", 120, (12, 1), (2048, 256)),  # new in 0.33.0
        ("GB10", 120, None, (2048, 256)),  # a catalog entry: no capability, the name says it
        ("NVIDIA L4", 22.49, (8, 9), (2048, 256)),
    ],
)
def test_batch_defaults(
    name: str, memory: float, capability: tuple[int, int] | None, want: tuple[int, int]
) -> None:
    assert batch_defaults(name, memory, capability) == want


def test_throughput_mode_doubles_only_what_was_left_out() -> None:
    limits = resolve_batch_limits(
        None,
        300,
        batch_defaults("NVIDIA H100", 80),
        max_model_len=32768,
        chunked_prefill=True,
        performance_mode="throughput",
    )
    assert (limits.max_num_batched_tokens, limits.max_num_seqs) == (16384, 300)


def test_check_limits_names_the_rule_with_vllms_message() -> None:
    limits = resolve_batch_limits(
        None, 4096, batch_defaults("NVIDIA L4", 24), max_model_len=None, chunked_prefill=True
    )
    with pytest.raises(SchedulerLimitError) as refused:
        check_limits(limits, max_num_active_seqs=None, max_model_len=None, chunked_prefill=True)
    assert refused.value.broken is Broken.BATCHED_BELOW_SEQS
    assert str(refused.value) == (
        "max_num_batched_tokens (2048) must be greater than or equal to max_num_seqs (4096)."
    )
