"""How vLLM 0.33's `vllm serve` parser takes the values of its options, on a run of argv tokens.

options.py says which option one token means; this module walks a run of tokens (the pod's
extraArgs, appended after the operator's own flags), as vLLM's parser rewrites them (rewrite.py:
`-O3`, dotted options such as `--compilation-config.mode=3` made JSON for their option), the way
argparse consumes them (CPython 3.11 `ArgumentParser._parse_known_args`), and says where vLLM
would exit (at the index of the token as given):

- a dotted option with no value at the end;
- an option of no value (`--enforce-eager`, `--enable-x` / `--no-enable-x`) given `=value`:
  "ignored explicit argument";
- an option that takes one value (`nargs` None) with none after it, or only a flag: "expected
  one argument"; `+` takes one or more, `?` zero or one;
- a value that the option's `type` refuses (value_types.py: ints, floats, vLLM's
  human-readable ints, its optional and JSON types, a config object that is not a JSON object)
  or that, converted, is not one of its `choices`;
- a value nothing consumes: `vllm serve` has one positional, the model, which the operator's
  own first argument fills, so any other is "unrecognized arguments";
- `--help` (and `-h`): the parser prints its help and exits, and the pod with it.

A config object's keys are checked (value_types.py), the values of its fields are not; the
parity tier (tests/parity) compares these verdicts with vLLM's parser.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from vllm_operator.vllm.numbers import FlagValueError
from vllm_operator.vllm.options import (
    Option,
    OptionTable,
    Resolution,
    load_option_table,
    negates,
    resolve_token,
)
from vllm_operator.vllm.rewrite import DottedArgError, rewrite_argv
from vllm_operator.vllm.value_types import converter, in_choices

_HELP: Final = "_HelpAction"


Reader = Callable[[str], Any]


@dataclass(frozen=True)
class Refusal:
    index: int  # the token vLLM's parser stops at
    message: str  # argparse's reason, in its words


@dataclass(frozen=True)
class Given:
    index: int  # the token that carries the value (`--dtype=half`, or the one after `--dtype`)
    value: str


@dataclass(frozen=True)
class _Walk:
    refusal: Refusal | None
    taken: tuple[tuple[Option, tuple[Given, ...]], ...]  # each option read, with its values


def _name(option: Option) -> str:
    return "/".join(option.strings)


def _explicit(token: str, string: str) -> str | None:
    """The value attached to `token` (`--flag=v`, `-Xv`), or None; `token` means `string`."""
    if token.startswith("--"):
        _, sep, value = token.partition("=")
        return value if sep else None
    if "=" in token and token.partition("=")[0] in (string, string[:2]):
        return token.partition("=")[2]
    if len(string) == 2 and len(token) > 2 and not string.startswith("--"):
        return token[2:]  # -Xvalue
    return None


def value_parser(option: Option) -> Callable[[str], object] | None:
    """The `type` vLLM's parser applies to the option's values (value_types.py, from what
    options.json records of it); None: the value is taken as given."""
    return converter(option.value, option.fields)


def checked_parser(option: Option) -> Callable[[str], object] | None:
    """`value_parser`, then argparse's check of the converted value against the choices;
    FlagValueError (argparse prints its text) for either refusal. None: nothing to check."""
    convert, choices = value_parser(option), option.choices
    if convert is None and choices is None:
        return None

    def parse(text: str) -> object:
        converted = text if convert is None else convert(text)
        if choices is not None and not in_choices(converted, choices):
            listed = ", ".join(repr(c) for c in choices)
            raise FlagValueError(f"invalid choice: {converted!r} (choose from {listed})")
        return converted

    parse.__name__ = option.type or "value"  # argparse names it in "invalid <name> value"
    return parse


def _value_problem(option: Option, value: str) -> str | None:
    parse = checked_parser(option)
    if parse is None:
        return None
    try:
        parse(value)
    except FlagValueError as exc:
        return f"argument {_name(option)}: {exc}"
    except ValueError:
        return f"argument {_name(option)}: invalid {option.type} value: {value!r}"
    return None


def _is_value(token: str, res: Resolution) -> bool:
    """argparse's 'A': what an option may take as its value."""
    return token != "--" and res.option is None and not (res.ambiguous or res.unknown)


def first_refusal(tokens: list[str], table: OptionTable | None = None) -> Refusal | None:
    """Where vLLM's parser would exit on `tokens` given after its own model argument; None
    where it takes them all. Unknown and ambiguous flags are options.py's to report first."""
    return _walk(tokens, table or load_option_table()).refusal


def given_values(tokens: list[str], table: OptionTable | None = None) -> dict[str, Given]:
    """What vLLM's parser stores for each single-value option that `tokens` set, by dest: the
    last one given wins, as in argparse. Empty where the parser would exit on them."""
    walk = _walk(tokens, table or load_option_table())
    if walk.refusal is not None:
        return {}
    return {option.dest: values[-1] for option, values in walk.taken if option.nargs is None}


def parsed_values(tokens: list[str], table: OptionTable | None = None) -> dict[str, object]:
    """What vLLM's namespace holds for each option `tokens` set, by dest, the last one given
    winning: a switch's True or False, a value as its `type` converts it, a list for `+`.
    Empty where the parser would exit on them."""
    walk = _walk(tokens, table or load_option_table())
    if walk.refusal is not None:
        return {}
    parsed: dict[str, object] = {}
    for option, values in walk.taken:
        if option.nargs == 0:
            parsed[option.dest] = not negates(values[-1].value, option.dest)
            continue
        convert = value_parser(option) or str
        converted = [convert(given.value) for given in values]
        if option.nargs == "?":
            parsed[option.dest] = converted[-1] if converted else True  # a bare one: its const
        else:
            parsed[option.dest] = converted[-1] if option.nargs is None else converted
    return parsed


def namespace_reader(tokens: list[str], table: OptionTable | None = None) -> Reader:
    """`value(dest)` as vLLM's namespace would answer it after parsing `tokens`: what they
    set (parsed_values), else the option's default (options.json)."""
    table = table or load_option_table()
    parsed = parsed_values(tokens, table)
    defaults = {option.dest: option.default for option in table.options}
    return lambda dest: parsed[dest] if dest in parsed else defaults.get(dest)


def _walk(given: list[str], table: OptionTable) -> _Walk:
    """argparse's reading of `given` after vLLM's rewrite (rewrite.py); every index in the
    result is the index in `given` of the token the rewritten one came from."""
    try:
        rewritten = rewrite_argv(given)
    except DottedArgError as exc:
        return _Walk(Refusal(exc.index, str(exc)), ())
    tokens, origins = list(rewritten.tokens), rewritten.origins
    walk = _walk_rewritten(tokens, table)
    refusal = walk.refusal
    if refusal is not None:
        refusal = Refusal(origins[refusal.index], refusal.message)
    taken = tuple(
        (option, tuple(Given(origins[v.index], v.value) for v in values))
        for option, values in walk.taken
    )
    return _Walk(refusal, taken)


def _walk_rewritten(tokens: list[str], table: OptionTable) -> _Walk:
    resolved = [resolve_token(t, table) for t in tokens]
    taken: list[tuple[Option, tuple[Given, ...]]] = []
    stray: int | None = None  # argparse collects these and reports them at the end
    i = 0
    while i < len(tokens):
        option = resolved[i].option
        if tokens[i] == "--":  # vLLM's parser reports it and all after as unrecognized
            stray = i if stray is None else stray
            break
        if option is None:
            stray = i if stray is None else stray
            i += 1
            continue
        found = table.by_string[option]
        i, refusal, values = _take(tokens, resolved, i, found)
        if refusal is not None:
            return _Walk(refusal, tuple(taken))
        if values is not None:
            taken.append((found, values))
    if stray is not None:
        return _Walk(Refusal(stray, f"unrecognized arguments: {tokens[stray]!r}"), tuple(taken))
    return _Walk(None, tuple(taken))


def _take(
    tokens: list[str], resolved: list[Resolution], at: int, option: Option
) -> tuple[int, Refusal | None, tuple[Given, ...] | None]:
    """The option at `at` with its values: the index after them, why vLLM refuses them, and
    the values as given (None where there are none to keep)."""
    token, string = tokens[at], resolved[at].option or ""
    if option.action == _HELP:
        return at, Refusal(at, f"{token!r}: vllm serve prints its help and exits"), None
    i = at + 1
    explicit = _explicit(token, string)
    if option.nargs == 0:
        if explicit is None:
            return i, None, (Given(at, string),)  # the spelling: --no-x sets it false
        refusal = Refusal(at, f"argument {_name(option)}: ignored explicit argument {explicit!r}")
        return i, refusal, None
    if explicit is not None:
        values = [Given(at, explicit)]
    else:
        while i < len(tokens) and _is_value(tokens[i], resolved[i]):
            i += 1
            if option.nargs in (None, "?"):
                break
        values = [Given(k, tokens[k]) for k in range(at + 1, i)]
        if not values and option.nargs in (None, "+"):
            many = "at least one argument" if option.nargs == "+" else "one argument"
            return i, Refusal(at, f"argument {_name(option)}: expected {many}"), None
    for given in values:
        problem = _value_problem(option, given.value)
        if problem is not None:
            return i, Refusal(given.index, problem), None
    return i, None, tuple(values)
