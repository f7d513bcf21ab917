"""Every option string of vLLM 0.33.0's `vllm serve`, and how vLLM resolves an argv token to one.

options.json is generated from vLLM's own parser (`python -m tests.parity.gen_options`, which runs
tests/parity/vllm_probe.py --options in the reference venv); the parity tier fails when it
differs from the parser. `resolve_token` follows what vLLM does to one argv element, in order:

1. FlexibleArgumentParser.parse_args (vllm/utils/argparse_utils.py): in a `--` token, `_` becomes
   `-` in the name (up to the first `.`); a dotted name (`--a.b=1`, `--a.b 1`) becomes `--a`
   with a JSON value;
2. argparse's ArgumentParser._parse_optional (CPython 3.11-3.12, allow_abbrev on): an exact
   option string; then `--name=value`; then any unique prefix of a long option (`--max-num-seq`),
   a prefix of a single-dash option (`-t` for `-tp`) or a two-character short option with its
   value attached (`-Xvalue`); several matches are an "ambiguous option" error; a token with a
   space and no match is a positional argument.

Each token is classified on its own, as argparse does before it consumes values, so an element
that follows a flag is judged as a flag too when it looks like one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Final

from vllm_operator.vllm.rewrite import is_dotted, rewrite_token

OPTIONS_FILE: Final = "options.json"


@dataclass(frozen=True)
class Option:
    strings: tuple[str, ...]  # every option string of one argparse action
    dest: str
    action: str  # argparse action class name: _StoreAction, BooleanOptionalAction, ...
    default: object
    choices: tuple[str, ...] | None
    nargs: str | int | None
    type: str | None  # name of the `type` callable, e.g. human_readable_int
    value: str | None = None  # what that callable does (value_types.py), e.g. optional(int)
    # a config object's keys, each with the pydantic-core schema of its value as JSON text,
    # or None where vLLM's own code decides (value_types.py)
    fields: tuple[tuple[str, str | None], ...] | None = None


@dataclass(frozen=True)
class OptionTable:
    vllm: str
    options: tuple[Option, ...]
    environment: frozenset[str] = frozenset()  # the variables vllm/envs.py defines
    by_string: dict[str, Option] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index = {s: opt for opt in self.options for s in opt.strings}
        object.__setattr__(self, "by_string", index)


def parse_option_table(text: str) -> OptionTable:
    data = json.loads(text)
    return OptionTable(
        vllm=data["vllm"],
        environment=frozenset(data.get("environment", ())),
        options=tuple(
            Option(
                strings=tuple(o["strings"]),
                dest=o["dest"],
                action=o["action"],
                default=o["default"],
                choices=None if o["choices"] is None else tuple(o["choices"]),
                nargs=o["nargs"],
                type=o["type"],
                value=o.get("value"),
                fields=_fields(o.get("fields")),
            )
            for o in data["options"]
        ),
    )


def _fields(fields: dict[str, object] | None) -> tuple[tuple[str, str | None], ...] | None:
    if fields is None:
        return None
    return tuple(
        (key, None if schema is None else json.dumps(schema, sort_keys=True))
        for key, schema in sorted(fields.items())
    )


@cache
def load_option_table() -> OptionTable:
    """The committed table (package data)."""
    text = resources.files("vllm_operator.vllm").joinpath(OPTIONS_FILE).read_text("utf-8")
    return parse_option_table(text)


@dataclass(frozen=True)
class Resolution:
    """What vLLM makes of one argv element: an option, ambiguity, an unknown flag, or a value."""

    token: str
    option: str | None = None  # the option string it resolves to
    ambiguous: tuple[str, ...] = ()  # option strings it could mean (argparse refuses it)
    unknown: bool = False  # looks like a flag vLLM does not have (argparse refuses it)

    @property
    def is_flag(self) -> bool:
        return self.option is not None


def normalize_token(token: str) -> str:
    """Step 1: FlexibleArgumentParser's rewrites of one element (rewrite.py), as far as they
    pick the option: `--a.b=1` -> `--a`, whose value becomes JSON."""
    head = rewrite_token([token], 0)[0]
    return head.partition(".")[0] if is_dotted(head) else head


def resolve_token(token: str, table: OptionTable | None = None) -> Resolution:
    """Step 2 on the normalized token; a value (no leading `-`) resolves to nothing."""
    table = table or load_option_table()
    strings = table.by_string
    arg = normalize_token(token)
    if not arg or arg[0] != "-" or len(arg) == 1 or arg == "--":
        return Resolution(token)  # a value; `--` ends the options (argparse)
    if arg in strings:
        return Resolution(token, option=arg)
    name, sep, _ = arg.partition("=")
    if sep and name in strings:
        return Resolution(token, option=name)
    matches = _prefix_matches(arg, strings)
    # CPython 3.11 calls two prefixes of one action ambiguous, newer ones take the action: the
    # stricter reading for a refusal is that the token means that action
    if matches and len({strings[m].dest for m in matches}) == 1:
        return Resolution(token, option=matches[0])
    if matches:
        return Resolution(token, ambiguous=tuple(matches))
    if _looks_negative_number(arg) or " " in arg:
        return Resolution(token)  # a positional value to argparse
    return Resolution(token, unknown=True)


def negates(string: str, dest: str) -> bool:
    """Whether a switch's spelling sets it false: `--no-x` of vLLM's boolean pairs, and
    `--disable-x` of its enable/disable ones (`--disable-log-stats` is a switch of its own)."""
    return string.startswith("--no-") or (
        string.startswith("--disable-") and not dest.startswith("disable")
    )


def resolve_dest(token: str, table: OptionTable | None = None) -> str | None:
    """The dest (EngineArgs attribute) vLLM sets from `token`, if it reads it as an option."""
    table = table or load_option_table()
    option = resolve_token(token, table).option
    return None if option is None else table.by_string[option].dest


def _prefix_matches(arg: str, strings: dict[str, Option]) -> list[str]:
    if arg.startswith("--"):
        prefix = arg.partition("=")[0]
        return [s for s in strings if s.startswith(prefix)]
    short = arg[:2]
    return [s for s in strings if s == short or s.startswith(arg)]


def _looks_negative_number(arg: str) -> bool:
    # argparse's _negative_number_matcher: '^-\d+$|^-\d*\.\d+$' (vLLM has no such options)
    body = arg[1:]
    whole, dot, frac = body.partition(".")
    if not dot:
        return body.isdigit() and body.isascii()
    return (whole == "" or (whole.isdigit() and whole.isascii())) and frac.isdigit()


def _nested(chars: str) -> str:
    """`abc` -> `(a(b(c)?)?)?`: any prefix of `chars`, dashes matching `_` too."""
    out = ""
    for ch in reversed(chars):
        out = f"({_char(ch)}{out})?"
    return out


def _char(ch: str) -> str:
    return "[-_]" if ch == "-" else ch


def _unique_from(string: str, others: list[str]) -> int:
    """Length of the shortest prefix of `string` no other action's option string starts with."""
    for k in range(2, len(string) + 1):
        if not any(o.startswith(string[:k]) for o in others):
            return k
    return len(string)


def resolving_pattern(
    dest: str, table: OptionTable | None = None, strings: tuple[str, ...] | None = None
) -> str:
    """RE2/Python regex (no backslashes: it drops into a CEL string) that matches exactly the
    tokens resolve_token resolves to the action `dest`, or only to its option `strings`."""
    table = table or load_option_table()
    action = next(o for o in table.options if o.dest == dest)
    others = [s for o in table.options if o is not action for s in o.strings]
    # a prefix of one of the action's other strings also resolves to the action (one dest):
    # leaving them out, those strings must be told apart as if they were other actions'
    kept = action.strings if strings is None else strings
    others += [s for s in action.strings if s not in kept]
    alternatives = []
    for string in kept:
        k = _unique_from(string, others)
        if not string.startswith("--") and string[:2] in others:
            k = len(string)  # -Xrest would mean the short option -X with a value
        if string.startswith("--"):
            head = "".join(_char(ch) for ch in string[2:k])
            alternatives.append(f"--{head}{_nested(string[k:])}([=.].*)?")
        elif len(string) == 2:
            alternatives.append(f"{string}.*")  # -Xvalue: the value attached
        else:
            alternatives.append(f"{string}=.*")
            alternatives.append(f"{string[:k]}{_nested(string[k:])}([.].*)?")
    return "^(" + "|".join(alternatives) + ")$"
