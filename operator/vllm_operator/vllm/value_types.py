"""What vLLM 0.33's `vllm serve` parser does to an option's value, from options.json's `value`.

The probe (tests/parity/vllm_probe.py `_value_type`) records each option's `type` callable as a
small description: a name (`int`, `float`, `str`, `loads`, `human_readable_int`, ...), vLLM's
wrappers around one (`optional(int)`: "" and "None" are None, else int; `parse(loads)`), a
config dataclass read from JSON (`dataclass:` and the keys it takes), or the lambda that
lower-cases a backend's name (`lower_snake`). `converter` turns a description back into a
callable that refuses (FlagValueError, a ValueError) what vLLM's refuses, so the operator's
extraArgs check and the twin's parser take every option's values as vLLM does
(vllm/engine/arg_utils.py: optional_type, parse_type, union_dict_and_str, parse_dataclass,
_expand_json_human_readable_numbers).

A dataclass value must be a JSON object of the dataclass's keys (after vLLM's expansion of
`80m`-style numbers), and each value must pass its field's validation where options.json records
it: the probe keeps a field's pydantic-core schema when it is data alone (types, literals,
bounds, lists and dicts of them: 144 of the 170 fields of vLLM 0.33's 20 config objects), and
pydantic-core's own SchemaValidator runs it here, so a value is coerced or refused exactly as
vLLM's `TypeAdapter(cls).validate_json` does it. Fields whose validation is vLLM's code (a
validator function, an enum, a nested config) are not checked, nor are the config's own checks
across its fields.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from functools import cache
from typing import Final

from pydantic_core import SchemaValidator, ValidationError

from vllm_operator.vllm.numbers import (
    FlagValueError,
    human_readable_int,
    human_readable_int_or_auto,
)

Convert = Callable[[str], object]
FieldSchemas = tuple[tuple[str, str | None], ...]  # options.py Option.fields

_NAMED: Final[dict[str, Convert]] = {
    "int": int,
    "float": float,
    "str": str,
    "loads": json.loads,
    "human_readable_int": human_readable_int,
    "human_readable_int_or_auto": human_readable_int_or_auto,
}
_DICT_TEXT: Final = re.compile(r"(?s)^\s*{.*}\s*$")
_QUOTED: Final = re.compile(r'("(?:[^"\\]|\\.)*")')
_SUFFIXED: Final = re.compile(r"\b\d+(?:\.\d+)?[kKmMgGtT]\b")
_WRAPPED: Final = re.compile(r"^(optional|parse)\((.*)\)$")


def converter(value_type: str | None, fields: FieldSchemas | None = None) -> Convert | None:
    """The callable for options.json's `value` description (and a config object's `fields`);
    None where the value is taken as given (no `type`, or one not recorded)."""
    if value_type is None:
        return None
    wrapped = _WRAPPED.match(value_type)
    if wrapped is not None:
        inner = converter(wrapped.group(2), fields) or str
        described = wrapped.group(2)
        if wrapped.group(1) == "optional":
            return _optional(inner, described)
        return _parse(inner, described)
    if value_type in _NAMED:
        return _NAMED[value_type]
    if value_type == "union_dict_and_str":
        return _union_dict_and_str
    if value_type.startswith("dataclass:"):
        keys = frozenset(value_type.removeprefix("dataclass:").split(","))
        return _dataclass_json(keys, dict(fields or ()))
    if value_type == "lora_module":
        return _lora_module
    if value_type == "lower_snake":
        return lambda text: text.lower().replace("-", "_")
    return None


def _optional(inner: Convert, described: str) -> Convert:
    parse = _parse(inner, described)

    def optional(text: str) -> object:
        return None if text in ("", "None") else parse(text)

    return optional


def _parse(inner: Convert, described: str) -> Convert:
    def parse(text: str) -> object:
        try:
            return inner(text)
        except FlagValueError:
            raise  # vLLM's ArgumentTypeError, which parse_type lets through with its words
        except ValueError:
            raise FlagValueError(f"Value {text} cannot be converted to {described}.") from None

    return parse


def _union_dict_and_str(text: str) -> object:
    """A JSON object where the text looks like one, else the text itself."""
    if not _DICT_TEXT.match(text):
        return text
    return _optional(json.loads, "loads")(text)


def _dataclass_json(keys: frozenset[str], schemas: Mapping[str, str | None]) -> Convert:
    """A JSON object of the config dataclass's keys, each value valid for its field's schema
    where one is recorded."""

    def parse(text: str) -> object:
        try:
            value = json.loads(expand_json_numbers(text))
        except ValueError:
            raise FlagValueError(f"invalid JSON for a config object: {text!r}") from None
        if not isinstance(value, dict):
            raise FlagValueError(f"a config object must be a JSON object, got {text!r}")
        unknown = sorted(set(value) - keys)
        if unknown:
            raise FlagValueError(f"unknown keys {unknown}; the config takes {sorted(keys)}")
        for key, item in value.items():
            problem = field_problem(schemas.get(key), item)
            if problem is not None:
                raise FlagValueError(f"{key}: {problem}")
        return value

    return parse


def field_problem(schema: str | None, value: object) -> str | None:
    """pydantic's first complaint about `value` (from JSON) for a field's `schema`, in one
    line; None where it takes the value or no schema is recorded."""
    if schema is None:
        return None
    try:
        _validator(schema).validate_json(json.dumps(value))
    except ValidationError as exc:
        error = exc.errors()[0]
        at = "".join(f"[{p!r}]" for p in error["loc"])
        got = json.dumps(value)
        got = got if len(got) <= 60 else got[:57] + "..."
        return f"{error['msg']}{' at ' + at if at else ''}, got {got}"
    return None


@cache
def _validator(schema: str) -> SchemaValidator:
    return SchemaValidator(json.loads(schema))


LORA_FIELDS: Final = {
    "name": True,
    "path": True,
    "base_model_name": False,
    "is_3d_lora_weight": False,
}


def _lora_module(text: str) -> object:
    """LoRAParserAction (vllm/entrypoints/common/cli_args.py): `name=path`, or a JSON object of
    LoRAModulePath's fields (name and path required); "" and "None" are skipped."""
    if text in ("", "None") or ("=" in text and "," not in text):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        raise FlagValueError(f"Invalid JSON format for --lora-modules: {text}") from None
    if not isinstance(value, dict):
        raise FlagValueError(f"Invalid fields for --lora-modules: {text} - not an object")
    unknown = sorted(set(value) - set(LORA_FIELDS))
    missing = [k for k, required in LORA_FIELDS.items() if required and k not in value]
    if unknown or missing:
        raise FlagValueError(
            f"Invalid fields for --lora-modules: {text} - unknown {unknown}, missing {missing}"
        )
    return value


def expand_json_numbers(text: str) -> str:
    """vLLM's _expand_json_human_readable_numbers: `80m` outside strings becomes 80000000."""
    parts = _QUOTED.split(text)
    for i in range(0, len(parts), 2):  # even parts are outside quoted strings
        parts[i] = _SUFFIXED.sub(lambda m: str(human_readable_int(m.group())), parts[i])
    return "".join(parts)


def in_choices(converted: object, choices: tuple[str, ...]) -> bool:
    """argparse checks the converted value against the choices; options.json writes each
    choice as text (vLLM's int choices, and None for an optional's unset value, as "None")."""
    return str(converted) in choices
