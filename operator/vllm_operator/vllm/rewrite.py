"""What vLLM 0.33's FlexibleArgumentParser does to `vllm serve`'s argv before argparse reads it.

`FlexibleArgumentParser.parse_args` (vllm/utils/argparse_utils.py), after it has moved a
`--model X` to the front (the twin's argv.py does that part; the operator writes the model
first), rewrites the tokens in two passes:

1. each token on its own: in a `--` token `_` becomes `-` in the name up to the first `.`
   (`--max_num_seqs` -> `--max-num-seqs`; the value after `=` is left alone); `--help=KEY`
   becomes `--help`; `-O3`, `-O=3` and `-Odecode` become `--optimization-level` and the value;
   `-O` followed by 0, 1, 2 or 3 becomes `--optimization-level`;
2. dotted options: any token that starts with `-` and has a `.` in its name (`--a.b=1`,
   `--a.b 1`, and a bare `-0.5`, read as option `-0` with key `5`) is taken out with its value
   (the next token, whatever it is, when there is no `=`); its value is read as JSON, else as a
   human-readable int, else as text, and `--a.b+ x,y` as the list ["x", "y"]; the values of one
   option merge into one nested object (objects merge, lists concatenate, the rest is
   replaced), and each option goes back at the end as `--a '{"b": 1}'`, in the order of first
   appearance.

argparse then reads the result, so what an option like `--max-num-seqs.x=1` means is decided
there: `--max-num-seqs '{"x": 1}'`, an invalid int. The twin parses the rewritten argv, and the
renderer judges a spec's extraArgs on it (values.py), each rewritten token keeping the index of
the token it came from so that a refusal names the element the user wrote.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from vllm_operator.vllm.numbers import human_readable_int

LEVEL_FLAG: Final = "--optimization-level"
_LEVELS: Final = ("0", "1", "2", "3")


class DottedArgError(ValueError):
    """A dotted option with no `=` at the end of argv: vLLM's rewrite fails on it (IndexError)
    before argparse runs."""

    def __init__(self, index: int, token: str) -> None:
        super().__init__(f"argument {token}: a dotted option expects one argument")
        self.index = index


@dataclass(frozen=True)
class Rewritten:
    tokens: tuple[str, ...]
    origins: tuple[int, ...]  # for each token, the index in the input of the token it came from


def is_level_pair(tokens: Sequence[str], i: int) -> bool:
    """`-O 3` at `i`: read as --optimization-level 3, though `-O` alone is no option."""
    return tokens[i] == "-O" and i + 1 < len(tokens) and tokens[i + 1] in _LEVELS


def rewrite_argv(argv: Sequence[str]) -> Rewritten:
    """`argv` as argparse receives it from vLLM's parser; DottedArgError where that fails."""
    tokens: list[str] = []
    origins: list[int] = []
    for i in range(len(argv)):
        for token in rewrite_token(argv, i):
            tokens.append(token)
            origins.append(i)
    return _merge_dotted(tokens, origins)


def rewrite_token(argv: Sequence[str], i: int) -> list[str]:
    """Pass 1 on the token at `i` (the one after it decides only `-O 3`)."""
    arg = argv[i]
    if arg.startswith("--help="):
        return ["--help"]
    if arg.startswith("--"):
        key, eq, value = arg.partition("=")
        head, dot, tail = key.partition(".")
        return [head.replace("_", "-") + dot + tail + eq + value]
    if arg.startswith("-O") and arg != "-O":
        return [LEVEL_FLAG, arg[3:] if arg[2] == "=" else arg[2:]]
    if is_level_pair(argv, i):
        return [LEVEL_FLAG]
    return [arg]


def is_dotted(token: str) -> bool:
    """Whether pass 2 takes `token` as a dotted option."""
    return token.startswith("-") and "." in token.partition("=")[0]


def _merge_dotted(tokens: list[str], origins: list[int]) -> Rewritten:
    kept: list[str] = []
    kept_origins: list[int] = []
    merged: dict[str, dict[str, Any]] = {}
    first_at: dict[str, int] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not is_dotted(token):
            kept.append(token)
            kept_origins.append(origins[i])
            i += 1
            continue
        name, eq, value = token.partition("=")
        if not eq:
            if i + 1 >= len(tokens):
                raise DottedArgError(origins[i], token)
            value = tokens[i + 1]
        if name.endswith("+"):
            name, value = name[:-1], json.dumps(value.split(","))
        key, *keys = name.split(".")
        nested: Any = _dotted_value(value)
        for part in reversed(keys):
            nested = {part: nested}
        _merge(merged.setdefault(key, {}), nested)
        first_at.setdefault(key, origins[i])
        i += 1 if eq else 2
    for key, obj in merged.items():
        kept += [key, json.dumps(obj)]
        kept_origins += [first_at[key], first_at[key]]
    return Rewritten(tuple(kept), tuple(kept_origins))


def _dotted_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        try:
            return human_readable_int(text)
        except ValueError:
            return text


def _merge(into: dict[str, Any], update: dict[str, Any]) -> None:
    """recursive_dict_update: nested objects merge, lists concatenate, the rest is replaced."""
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        elif isinstance(v, list) and isinstance(into.get(k), list):
            into[k] += v
        else:
            into[k] = v
