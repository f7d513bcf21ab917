"""A seeded random corpus of `vllm serve` argv, judged by vLLM 0.33.0's parser and by ours.

test_vllm_parity.py checks chosen argv. Here every option of vLLM's parser (options.json) can
come up, one or two to an argv, each with a value drawn from its choices and from VALUES (text
of every shape its types refuse or take: numbers, JSON, "None", suffixed ints, a bare `-0.5`),
given as `--flag value` or `--flag=value`; a second part gives them as dotted options
(`--flag.key value`, `--flag.key=value`, `--flag.key+ a,b`), which vLLM's parser rewrites into
JSON for `--flag` before argparse reads it (vllm_operator.vllm.rewrite), with made-up keys and a
config object's own; a third gives the config objects (`--kv-transfer-config`, ...) JSON objects
of one or two of their own keys with values of every JSON kind. vLLM's probe
(tests/parity/vllm_probe.py) parses each, runs `vllm serve`'s own checks and builds its
SchedulerConfig and CacheConfig; then:

* the twin (`parse_vllm_argv`) refuses an argv exactly where vLLM's parser or `vllm serve`'s
  checks refuse it, and where SchedulerConfig or CacheConfig refuse it, its engine does;
* the operator refuses the same tokens as a spec's extraArgs (`checked_extra_args`, then
  `check_serve`) exactly where vLLM's parser or `vllm serve`'s checks exit on them, for the argv
  that set no flag the operator owns (nor a chat template path, which vLLM looks up in the
  pod's files), and a
  bare negative decimal (`-0.5`) always: vLLM reads it as a dotted option, which takes the
  next argument (a flag too) as its value.

The twin's engine also refuses what vLLM refuses only when the engine starts and the probe does
not build (a tensor-parallel size the model's heads do not divide, a KV cache that holds no
request), so an argv vLLM's probe accepts may stop there; `--max-model-len` is left out, as its
`auto` needs the GPU's memory (test_vllm_parity.py covers it).

Not reproduced, so not compared: a config object's checks that are vLLM's code rather than a
type (value_types.py): a field with a validator function, an enum or a nested config, and the
checks across its fields (`kv_role` needed with `kv_connector`). An argv that vLLM refuses only
for those (its pydantic error names no field whose schema options.json records, or one of its
validators crashes on the value) is left out.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.parity.gen_options import ReferenceError, run_probe
from vllm_operator.api import flags
from vllm_operator.render.args import NEGATIVE_DECIMAL, check_serve, checked_extra_args
from vllm_operator.render.errors import RenderError
from vllm_operator.vllm.options import Option, load_option_table
from vllm_twin.argv import ArgvError, parse_vllm_argv
from vllm_twin.server.setup import build_engine

pytestmark = pytest.mark.timeout(1800)

MODEL = "Qwen/Qwen2.5-7B-Instruct"
ARGVS = 1500  # about 20 s of vLLM's parser on 2 cores
DOTTED_ARGVS = 600
CONFIG_ARGVS = 400
SEED = 20261207
VALUES = [
    "1", "0", "-1", "2", "4096", "99999999999999999999", "1.5", "0.5", "-0.5", "1e3", "nan",
    "inf", "1k", "8K", "abc", "", "None", "none", "auto", "true", "false", "[1]", '{"a":1}',
    "{}", '{"mode": 3}', '{"kv_connector": "x"}', "a=b", '{"name": "a", "path": "b"}',
]  # fmt: skip
LEFT_OUT = ("help", "version", "config", "max_model_len")
KEYS = ["a", "0", "x.y", "name", "mode", "level", "backend", "enabled"]
JSON_VALUES: list[Any] = [
    1, 0, -1, 2.5, 3.0, 1e30, "x", "", "1", "true", "auto", "kv_both", "xgrammar", "FULL", True,
    False, None, [], [1], ["a"], [1, "2"], {}, {"a": 1}, {"a": "b"},
]  # fmt: skip


def _corpus() -> list[list[str]]:
    options = [o for o in load_option_table().options if o.dest not in LEFT_OUT]
    rng = random.Random(SEED)
    plain = [_argv(options, rng, _plain) for _ in range(ARGVS)]
    dotted = [_argv(options, rng, _dotted) for _ in range(DOTTED_ARGVS)]
    configs = [o for o in options if o.fields]
    return plain + dotted + [_argv(configs, rng, _config_object) for _ in range(CONFIG_ARGVS)]


Give = Callable[[Option, str, random.Random], list[str]]


def _argv(options: list[Option], rng: random.Random, give: Give) -> list[str]:
    argv = [MODEL]
    for _ in range(rng.randint(1, 2)):
        option = rng.choice(options)
        argv += give(option, rng.choice(option.strings), rng)
    return argv


def _plain(option: Option, flag: str, rng: random.Random) -> list[str]:
    if option.nargs == 0:
        return [flag]
    value = rng.choice([*(option.choices or ()), *VALUES])
    return [flag, value] if rng.random() < 0.8 else [f"{flag}={value}"]


def _dotted(option: Option, flag: str, rng: random.Random) -> list[str]:
    fields = (option.value or "").partition("dataclass:")[2].rstrip(")").split(",")
    key = rng.choice([*KEYS, *filter(None, fields)]) + ("+" if rng.random() < 0.15 else "")
    value = rng.choice(VALUES)
    return [f"{flag}.{key}", value] if rng.random() < 0.5 else [f"{flag}.{key}={value}"]


def _config_object(option: Option, flag: str, rng: random.Random) -> list[str]:
    keys = [key for key, _ in option.fields or ()]
    value = {rng.choice(keys): rng.choice(JSON_VALUES) for _ in range(rng.randint(1, 2))}
    return [flag, json.dumps(value)]


_CONFIG_ERROR = re.compile(
    r"argument (\S+): (\d+ validation errors? for \w+ .*|invalid \w+ value: .*)$"
)
_PYDANTIC_ERROR = re.compile(r"(?:for \w+ |/v/\w+ )(\S+) .*?\[type=(\w+)")


def _decided_by_vllms_code(theirs: dict[str, Any]) -> bool:
    """Refused by a config class for what vLLM's own code checks (the module docstring): none
    of its errors names a field whose schema options.json records or an unknown key, or a
    validator raised (argparse's "invalid parse_dataclass value") or crashed."""
    error = theirs["error"] or ""
    found = _CONFIG_ERROR.search(error)
    if error.startswith("crash: "):
        return True
    if found is None:
        return False
    option = load_option_table().by_string[found.group(1).split("/")[0]]
    if option.fields is None:
        return False
    if found.group(2).startswith("invalid "):
        return True  # pydantic's own refusals read "N validation errors for ..."
    checked = {key for key, schema in option.fields if schema is not None}
    return not any(
        loc.split(".")[0] in checked or (kind == "unexpected_keyword_argument" and "." not in loc)
        for loc, kind in _PYDANTIC_ERROR.findall(found.group(2))
    )


CORPUS = _corpus()


@pytest.fixture(scope="module")
def verdicts(vllm_python: str) -> list[dict[str, Any]]:
    payload = [{"argv": argv, "device": "h100", "model_max_len": 32768} for argv in CORPUS]
    try:
        answer = run_probe(vllm_python, [], payload)
    except ReferenceError as exc:
        pytest.fail(str(exc), pytrace=False)
    assert answer["vllm"] == "0.33.0" and len(answer["results"]) == len(CORPUS)
    return list(answer["results"])


def _twin(argv: list[str]) -> tuple[str | None, str | None]:
    """(the parser's refusal, the engine's refusal) of the twin for `argv`."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            args = parse_vllm_argv(argv, {})
    except (ArgvError, SystemExit) as exc:
        return str(exc), None
    try:
        build_engine(args)
    except ValueError as exc:
        return None, str(exc)
    return None, None


def _shown(argv: list[str], theirs: dict[str, Any], ours: str | None) -> str:
    return f"{argv[1:]}: vLLM {theirs['stage']} {theirs['error']!r:.160}, ours {ours!r:.160}"


def test_the_twin_refuses_an_argv_where_vllm_does(verdicts: list[dict[str, Any]]) -> None:
    found = []
    for argv, theirs in zip(CORPUS, verdicts, strict=True):
        parser, engine = _twin(argv)
        if theirs["accepted"]:
            agrees = parser is None
        elif theirs["stage"] == "config":
            agrees = (parser or engine) is not None
        else:
            agrees = parser is not None
        # a refusal of vLLM's own code is not reproduced (the module docstring)
        if not agrees and not _decided_by_vllms_code(theirs):
            found.append(_shown(argv, theirs, parser or engine))
    assert not found, f"{len(found)} of {len(CORPUS)} argv:\n" + "\n".join(found[:20])


def test_the_operator_refuses_extra_args_where_vllm_serve_exits(
    verdicts: list[dict[str, Any]],
) -> None:
    found, compared = [], 0
    for argv, theirs in zip(CORPUS, verdicts, strict=True):
        extra = argv[1:]
        if any(flags.extra_arg_problem(token) is not None for token in extra):
            continue  # a flag the operator owns: refused for that, whatever vLLM says
        if "appears path-like" in (theirs["error"] or ""):
            continue  # a chat template path: vLLM looks in the pod's files, unknown to us
        compared += 1
        try:
            check_serve(checked_extra_args(extra), {})
            ours = None
        except RenderError as exc:
            ours = str(exc)
        # a bare `-0.5` is refused outright: vLLM's dotted rewrite may swallow the flag after it
        exits = any(NEGATIVE_DECIMAL.match(token) for token in extra) or (
            not theirs["accepted"] and theirs["stage"] in ("parse", "validate")
        )
        if (ours is not None) != exits and not _decided_by_vllms_code(theirs):
            found.append(_shown(argv, theirs, ours))
    assert compared > len(CORPUS) // 2
    assert not found, f"{len(found)} of {compared} argv:\n" + "\n".join(found[:20])
