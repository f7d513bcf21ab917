"""vLLM's integer syntax on the command line (vllm/utils/argparse_utils.py, human_readable_int).

`8k` = 8000 (lower-case suffixes are decimal and take a fraction: `1.5k` = 1500), `8K` = 8192
(upper-case suffixes are binary and refuse a fraction), and a plain integer is Python's `int()`.
`--max-model-len` also takes `auto` or `-1` (human_readable_int_or_auto).
"""

from __future__ import annotations

import argparse
import re
from typing import Final

_DECIMAL: Final = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY: Final = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SUFFIXED: Final = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
AUTO: Final = -1  # what `auto` and `-1` parse to: the largest length that fits in KV memory


class FlagValueError(argparse.ArgumentTypeError, ValueError):
    """A value vLLM's parser refuses: argparse prints the message, pydantic sees a ValueError."""


def human_readable_int(text: str, name: str = "human_readable_int") -> int:
    """The integer in `text` as vLLM reads it; FlagValueError when vLLM would refuse it, in
    argparse's words (vLLM's own for a decimal with a binary suffix; "invalid <name> value"
    where vLLM's int() fails, `name` being the function argparse names)."""
    value = text.strip()
    match = _SUFFIXED.fullmatch(value)
    if match is not None:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." in number:
            raise FlagValueError(
                f"Decimals are not allowed with binary suffixes like {suffix}. "
                f"Did you mean to use {number}{suffix.lower()} instead?"
            )
        return int(number) * _BINARY[suffix]
    try:
        return int(value)
    except ValueError:
        raise FlagValueError(f"invalid {name} value: {text!r}") from None


def human_readable_int_or_auto(text: str) -> int:
    """`--max-model-len`: `auto` or `-1` (AUTO), else a human-readable integer."""
    value = text.strip()
    if value == "-1" or value.lower() == "auto":
        return AUTO
    return human_readable_int(value, "human_readable_int_or_auto")
