"""Jinja2 lays manifests out; it computes nothing.

Rules (docs/architecture.md §4.7): StrictUndefined, each value through `tojson` (JSON is YAML, so a
value can never break the document structure), output parsed with a safe YAML loader at once and
checked. For the built-in templates only the layout around the values is parsed as YAML, once
per layout, and the values are read back as JSON (render/skeleton.py says when that is the
same). An operator may point `templateDir` at its own templates; a file there replaces the
built-in one of the same name, and the same checks apply.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import jinja2
import yaml

from vllm_operator.render.errors import TemplateOutputError
from vllm_operator.render.skeleton import fill, recording, stand_in

# libyaml's safe loader when PyYAML has it (its wheels do): parsing the rendered text was the
# largest CPU cost of a reconcile pass in the operator-scale profile. Same safe constructors.
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# A character beyond U+FFFF as JSON escapes it (a surrogate pair), which YAML refuses; each match
# is one escape, so an escaped backslash followed by "u" is never read as one
_ESCAPE = re.compile(r"\\(?:u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})|.)")


def _astral_escaped(wire: str) -> str:
    """`wire` (JSON) with each surrogate pair written as YAML's \\U escape of its character."""

    def one(found: re.Match[str]) -> str:
        if found.group(1) is None:
            return found.group(0)
        high, low = int(found.group(1), 16), int(found.group(2), 16)
        return f"\\U{0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00):08x}"

    return _ESCAPE.sub(one, wire) if "\\ud" in wire else wire


def _tojson(value: Any) -> str:
    """JSON in the dict order Python built (readable manifests), ASCII-only so no character can
    act as a YAML line break, and a character beyond U+FFFF as YAML's escape of it; an undefined
    value fails here instead of serialising oddly."""
    if isinstance(value, jinja2.Undefined):
        value._fail_with_undefined_error()
    wire = json.dumps(value, ensure_ascii=True)
    placeholder = stand_in(value, wire)
    return _astral_escaped(wire) if placeholder is None else placeholder


@functools.lru_cache(maxsize=8)
def _environment(template_dir: str | None) -> jinja2.Environment:
    loaders: list[jinja2.BaseLoader] = []
    if template_dir is not None:
        loaders.append(jinja2.FileSystemLoader(template_dir))
    loaders.append(jinja2.PackageLoader("vllm_operator", "templates"))
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # YAML out, not HTML; tojson does the quoting
        keep_trailing_newline=True,
        # built-in templates never change under a running operator: do not stat them on every
        # render; an operator's own templateDir is still re-read when its files change
        auto_reload=template_dir is not None,
    )
    env.filters["tojson"] = _tojson
    return env


@functools.lru_cache(maxsize=1024)
def _parsed_as_json(text: str) -> str | None:
    """`text` parsed, kept as JSON: every pass of a service renders the same few texts again,
    and parsing YAML costs about ten times what reading its JSON does. None: the document does
    not survive JSON unchanged (a date, a number as a key), so it is parsed every time."""
    return lossless_json(yaml.load(text, Loader=_SAFE_LOADER))


def lossless_json(doc: Any) -> str | None:
    """`doc` as JSON, or None when reading that back would not give `doc` unchanged."""
    try:
        wire = json.dumps(doc)
    except (TypeError, ValueError):
        return None
    return wire if json.loads(wire) == doc else None


def _parse(text: str) -> Any:
    """A fresh document for `text` (the caller may change it); raises yaml.YAMLError."""
    wire = _parsed_as_json(text)
    return yaml.load(text, Loader=_SAFE_LOADER) if wire is None else json.loads(wire)


def _layout_filled(template: jinja2.Template, values: dict[str, Any]) -> Any | None:
    """The document, with only the template's own layout parsed as YAML (render/skeleton.py);
    None: parse the whole text instead."""
    with recording() as texts:
        layout = template.render(**values)
    try:
        wire = _parsed_as_json(layout)
    except yaml.YAMLError:
        return None  # the whole text says where
    return None if wire is None else fill(json.loads(wire), texts)


def render_manifest(
    name: str,
    values: dict[str, Any],
    *,
    api_version: str,
    kind: str,
    template_dir: str | None = None,
) -> dict[str, Any]:
    """Render template `name` with `values`; the result must be one `kind` manifest."""
    where = f"template {name}"
    try:
        template = _environment(template_dir).get_template(name)
        # an operator's own templates may use tojson's output otherwise than as a whole value
        doc = _layout_filled(template, values) if template_dir is None else None
        text = "" if doc is not None else template.render(**values)
    except jinja2.TemplateError as exc:
        raise TemplateOutputError(where, f"cannot render: {exc}") from None
    try:
        doc = _parse(text) if doc is None else doc
    except yaml.YAMLError as exc:
        raise TemplateOutputError(where, f"output is not valid YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise TemplateOutputError(where, "output is not a YAML map")
    if doc.get("apiVersion") != api_version or doc.get("kind") != kind:
        got = f"{doc.get('apiVersion')}/{doc.get('kind')}"
        raise TemplateOutputError(where, f"expected {api_version} {kind}, got {got}")
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict) or not metadata.get("name"):
        raise TemplateOutputError(where, "output has no metadata.name")
    return doc
