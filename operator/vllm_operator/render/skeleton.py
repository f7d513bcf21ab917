"""The built-in templates' output read without parsing the values in it as YAML.

Every value reaches a template through `tojson`, and parsing those JSON values with a YAML
loader was the largest share of the operator's CPU while a fleet starts (docs/operator-scale.md:
each service's first render is text no other service has, so no cache helps). While
templates.py records, `tojson` writes a placeholder instead (a quoted YAML string) and keeps the
JSON; the text left, the template's own layout, is the same for every service of the same
shape, so its parse is cached, and `fill` puts each value back into the parsed document as
json.loads reads it.

That is the same document the whole text gives only where YAML reads each value as JSON does
and each placeholder is a whole YAML value. `fill` says None otherwise (the caller then parses
the whole text): a value YAML reads differently (`reads_the_same_in_yaml`), a placeholder inside
a longer string or a key, one missing or used twice.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_MARK = "@@vllmop-value-"
_PLACEHOLDER = re.compile(r"@@vllmop-value-(\d+)@@")
# YAML 1.1 (PyYAML) reads a float only with a dot: 1e-05 is the string "1e-05" to it
_PLAIN_FLOAT = re.compile(r"-?[0-9]+\.[0-9]+")
_LONGEST_KEY = 1000  # characters; YAML's limit is 1024, counted with what follows the key

_recording = threading.local()


@contextmanager
def recording() -> Iterator[list[str | None]]:
    """While it lasts, `stand_in` on this thread keeps values (None: one YAML reads otherwise)."""
    texts: list[str | None] = []
    _recording.texts = texts
    try:
        yield texts
    finally:
        _recording.texts = None


def stand_in(value: Any, text: str) -> str | None:
    """While recording, what `tojson` writes for `value` (`text`: its JSON): a placeholder;
    None when not recording."""
    texts: list[str | None] | None = getattr(_recording, "texts", None)
    if texts is None:
        return None
    texts.append(text if reads_the_same_in_yaml(value) else None)
    return f'"{_MARK}{len(texts) - 1}@@"'


def reads_the_same_in_yaml(value: Any) -> bool:
    """Whether PyYAML's safe loader reads what `tojson` writes for `value` as json.loads reads
    its JSON. Not so: floats written with an exponent or not finite, and lone surrogates (no
    text from the API server has them: it speaks UTF-8)."""
    if value is None or isinstance(value, bool | int):
        return True
    if isinstance(value, str):
        return not any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, float):
        return math.isfinite(value) and _PLAIN_FLOAT.fullmatch(json.dumps(value)) is not None
    if isinstance(value, list | tuple):
        return all(map(reads_the_same_in_yaml, value))
    if isinstance(value, dict):
        return all(_plain_key(k) and reads_the_same_in_yaml(v) for k, v in value.items())
    return False


def _plain_key(key: Any) -> bool:
    """A key YAML reads in a flow mapping as JSON does: YAML takes no implicit key longer than
    1024 characters (its JSON is never shorter than what tojson writes)."""
    return (
        isinstance(key, str)
        and reads_the_same_in_yaml(key)
        and len(json.dumps(key, ensure_ascii=True)) <= _LONGEST_KEY
    )


class _MismatchError(Exception):
    pass


def fill(doc: Any, texts: list[str | None]) -> Any | None:
    """`doc` (a parse of the placeholders' text) with each placeholder replaced by its value, or
    None when that would not be the parse of the whole text (module docstring)."""
    if any(text is None for text in texts):
        return None
    used: set[int] = set()

    def value_of(node: Any) -> Any:
        if isinstance(node, str):
            if _MARK not in node:
                return node
            found = _PLACEHOLDER.fullmatch(node)
            index = -1 if found is None else int(found.group(1))
            if not 0 <= index < len(texts) or index in used:
                raise _MismatchError
            used.add(index)
            return json.loads(texts[index])  # type: ignore[arg-type]
        if isinstance(node, list):
            return [value_of(item) for item in node]
        if isinstance(node, dict):
            if any(isinstance(key, str) and _MARK in key for key in node):
                raise _MismatchError
            return {key: value_of(item) for key, item in node.items()}
        return node

    try:
        filled = value_of(doc)
    except _MismatchError:
        return None
    return filled if len(used) == len(texts) else None
