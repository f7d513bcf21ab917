"""vLLM 0.33's facts (vllm_operator.vllm) against vLLM 0.33.0 itself.

* options.json, the committed option list, is exactly what vLLM's `vllm serve` parser holds;
* resolve_token reads every generated argv token as vLLM does (its FlexibleArgumentParser
  rewrites, then argparse's _parse_optional): option and dest, ambiguous, unknown or a value;
* the dtype lists of vllm_operator.vllm.dtypes are vLLM's, and its KV-dtype check refuses what
  VllmConfig refuses, with the same message;
* the value parsers of the flag table (int, human-readable int, `auto`, float) accept and
  refuse what vLLM's own `type` callables accept and refuse, with the same values.

docs/parity.md explains the method; tests/parity/vllm_probe.py does vLLM's side.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.parity.gen_options import (
    OPTIONS_JSON,
    ReferenceError,
    format_options,
    run_probe,
)
from vllm_operator.api import flags as owned_flags
from vllm_operator.vllm import dtypes, env
from vllm_operator.vllm import flags as vf
from vllm_operator.vllm.numbers import FlagValueError
from vllm_operator.vllm.options import load_option_table, resolve_token
from vllm_operator.vllm.serve_checks import serve_problem
from vllm_operator.vllm.values import namespace_reader

pytestmark = pytest.mark.timeout(1800)
TABLE = load_option_table()


def _probe(python: str, mode: str, payload: Any = None) -> Any:
    try:
        return run_probe(python, [mode], payload)
    except ReferenceError as exc:
        pytest.fail(str(exc), pytrace=False)


def test_committed_option_list_is_vllms(vllm_python: str) -> None:
    live = _probe(vllm_python, "--options")
    assert live["vllm"] == "0.33.0"
    assert OPTIONS_JSON.read_text(encoding="utf-8") == format_options(live), (
        "options.json differs from vLLM's parser: run python -m tests.parity.gen_options"
    )


def _variants(prefix: str) -> list[str]:
    out = [prefix, prefix + "=1", prefix + ".x=1", prefix + " 1", prefix.upper()]
    if prefix.startswith("--"):
        out.append("--" + prefix[2:].replace("-", "_"))
    return out


def resolution_tokens() -> list[str]:
    """Every prefix of every owned flag's spellings in several forms, plus each vLLM option
    exactly, with a value and as a prefix, plus the odd ones out."""
    tokens: set[str] = set()
    for owned in owned_flags.OWNED_FLAGS:
        for spelling in owned.spellings:
            for cut in range(1, len(spelling) + 1):
                tokens.update(_variants(spelling[:cut]))
    for option in TABLE.options:
        for string in option.strings:
            tokens.update(_variants(string))
            tokens.update(_variants(string[: max(2, len(string) // 2)]))
            tokens.add(string[:-1])
    tokens.update(["--", "-", "", "x", "-1", "-1.5", "-O", "-O3", "-O=3", "-tp4", "-n4", "-qfp8"])
    # --config reads a file and --help/-h print and exit: not tokens a parse can judge
    return sorted(t for t in tokens if not t.startswith(("--config", "--help", "-h")))


def _ours(token: str) -> dict[str, Any]:
    resolution = resolve_token(token)
    if resolution.option is not None:
        return {"kind": "option", "dest": TABLE.by_string[resolution.option].dest}
    if resolution.ambiguous:
        return {"kind": "ambiguous"}
    return {"kind": "unknown" if resolution.unknown else "value"}


def test_tokens_resolve_as_vllm_resolves_them(vllm_python: str) -> None:
    tokens = resolution_tokens()
    answer = _probe(vllm_python, "--resolve", tokens)["results"]
    theirs = [
        {"kind": r["kind"], "dest": r["dest"]} if r["kind"] == "option" else {"kind": r["kind"]}
        for r in answer
    ]
    differ = [
        (t, o, v) for t, o, v in zip(tokens, map(_ours, tokens), theirs, strict=True) if o != v
    ]
    assert differ == [], f"{len(differ)} of {len(tokens)} tokens differ, e.g. {differ[:5]}"
    assert len(tokens) > 5000


VALUES = [
    "8",
    "0",
    "-1",
    "-2",
    " 8 ",
    "8k",
    "8K",
    "1.5k",
    "1.5K",
    "2m",
    "1G",
    "auto",
    "AUTO",
    "0.5",
    "1e3",
    "x",
    "8kb",
    "1_000",
]


def _value_cases() -> list[tuple[vf.VllmFlag, str]]:
    return [(f, v) for f in vf.FLAGS if f.kind in vf.PARSERS for v in VALUES]


def test_value_parsers_are_vllms(vllm_python: str) -> None:
    cases = _value_cases()
    answer = _probe(vllm_python, "--values", [{"dest": f.dest, "value": v} for f, v in cases])
    differ = []
    for (flag, value), theirs in zip(cases, answer["results"], strict=True):
        try:
            ours: dict[str, Any] = {"ok": True, "value": vf.PARSERS[flag.kind](value)}
        except FlagValueError:
            ours = {"ok": False}
        if ours["ok"] != theirs["ok"] or (ours["ok"] and ours["value"] != theirs["value"]):
            differ.append((flag.flag, value, ours, theirs))
    assert differ == []


def test_dtype_lists_and_the_kv_dtype_check_are_vllms(vllm_python: str) -> None:
    cases = [
        {"cache": cache, "model": model}
        for cache in ("auto", "float16", "bfloat16", "fp8")
        for model in ("bfloat16", "float16", "float32")
    ]
    answer = _probe(vllm_python, "--dtypes", cases)
    assert list(dtypes.KV_CACHE_DTYPES) == answer["kv_cache_dtypes"]
    assert list(dtypes.MODEL_DTYPES) == answer["model_dtypes"]
    for case, theirs in zip(cases, answer["results"], strict=True):
        try:
            dtypes.check_kv_cache_dtype(case["cache"], case["model"])
            ours = None
        except ValueError as exc:
            ours = str(exc)
        assert (case, ours) == (case, theirs["error"])


def test_the_long_context_variable_reads_as_vllm_reads_it(vllm_python: str) -> None:
    values = ["1", "true", " True ", "TRUE", "0", "false", "yes", "on", "", "2", "1 "]
    cases = [{"name": env.ALLOW_LONG_MAX_MODEL_LEN, "value": v} for v in values]
    answer = _probe(vllm_python, "--env-flags", cases)
    assert [env.env_flag(v) for v in values] == answer["results"]


def test_unknown_vllm_variables_stop_vllm_where_they_stop_ours(vllm_python: str) -> None:
    """Platform.validate_environ, which create_engine_config runs: with
    --fail-on-environ-validation the first VLLM_* variable vLLM does not define stops it."""
    envs = [
        {"VLLM_CACHE_ROOT": "/c", "VLLM_LOGGING_LEVEL": "DEBUG"},
        {"VLLM_ATTENTON_BACKEND": "x"},
        {"VLLM_CACHE_ROOT": "/c", "VLLM_FOO": "1", "VLLM_BAR": "2"},
        {"VLLM_TWIN_GPU": "L4"},  # the twin's own: unknown to vLLM (the twin sets them aside)
        {"vllm_foo": "1", "VLLMFOO": "1", "MY_VLLM_X": "1", "VLLM": "1"},
        {},
    ]
    cases = [{"env": e, "hard_fail": hard} for e in envs for hard in (True, False)]
    answer = _probe(vllm_python, "--environ", cases)
    for case, theirs in zip(cases, answer["results"], strict=True):
        args = ["--fail-on-environ-validation"] if case["hard_fail"] else []
        ours = serve_problem(namespace_reader(args), case["env"], local_files=False)
        assert (case, ours) == (case, theirs)
