"""Write (or, with --check, verify) docs/crd-reference.md from the VLLMService models.

    python -m vllm_operator.tools.gen_docs [--check] [--root DIR]

Every field's text is its `Field(description=...)`, read from the same structural schema that
the CRD carries (so `kubectl explain` and this page say the same); the cross-field rules are
listed with the message the API server returns. --check writes nothing and exits 1 when the page
is stale.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from vllm_operator.api.crd import build_openapi_schema
from vllm_operator.api.rules import RULES
from vllm_operator.constants import API_VERSION, KIND, PLURAL, SHORT_NAME

DOC_PATH: Final = Path("docs/crd-reference.md")


def _type(node: dict[str, Any]) -> str:
    kind = str(node.get("type", "object"))
    if kind == "array":
        return f"[]{_type(node.get('items', {}))}"
    if kind == "object" and "additionalProperties" in node:
        return f"map[string]{_type(node['additionalProperties'])}"
    return kind


def _constraints(node: dict[str, Any]) -> str:
    parts = []
    if "enum" in node:
        parts.append("one of " + ", ".join(f"`{v}`" for v in node["enum"]))
    for key, word in (("minimum", ">="), ("maximum", "<=")):
        if key in node:
            exclusive = node.get("exclusive" + key.capitalize()) is True
            parts.append(f"{word.replace('=', '') if exclusive else word} {node[key]}")
    for key, word in (("minLength", "min length"), ("maxLength", "max length")):
        if key in node:
            parts.append(f"{word} {node[key]}")
    if "maxItems" in node:
        parts.append(f"at most {node['maxItems']} items")
    if "pattern" in node:
        parts.append(f"pattern `{node['pattern']}`")
    if "default" in node:
        parts.append(f"default `{node['default']}`")
    return "; ".join(parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _rows(node: dict[str, Any], prefix: str) -> Iterator[tuple[str, dict[str, Any], bool]]:
    required = set(node.get("required", []))
    for name, sub in node.get("properties", {}).items():
        path = f"{prefix}.{name}" if prefix else name
        yield path, sub, name in required
        target = sub.get("items", sub) if sub.get("type") == "array" else sub
        if target.get("properties"):
            yield from _rows(target, path + ("[]" if sub.get("type") == "array" else ""))


def _table(schema: dict[str, Any], root: str) -> list[str]:
    lines = ["| Field | Type | Constraints | Description |", "|---|---|---|---|"]
    for path, node, required in _rows(schema["properties"][root], root):
        name = f"`{path}`" + (" (required)" if required else "")
        lines.append(
            f"| {name} | {_type(node)} | {_cell(_constraints(node))} "
            f"| {_cell(str(node.get('description', '')))} |"
        )
    return lines


def render_reference() -> str:
    schema = build_openapi_schema()
    out = [
        "# VLLMService reference",
        "",
        "<!-- Generated from vllm_operator.api by `python -m vllm_operator.tools.gen_docs`."
        " Do not edit: change the Field(description=...) texts and regenerate. -->",
        "",
        f"`apiVersion: {API_VERSION}`, `kind: {KIND}` (plural `{PLURAL}`, short name "
        f"`{SHORT_NAME}`). {schema.get('description', '')}",
        "",
        "Fields are camelCase on the wire. Omitted budget and engine fields mean vLLM's own "
        "default: the operator does not pass the flag. The same text is shown by "
        "`kubectl explain vllmservice.spec --recursive`.",
        "",
        "## spec",
        "",
        *_table(schema, "spec"),
        "",
        "## Cross-field rules",
        "",
        "The API server enforces these at `kubectl apply` (CEL rules of the CRD); the operator "
        "and `vllm-operator render` apply the same checks. Each row is the exact message.",
        "",
        "| Where | Message |",
        "|---|---|",
    ]
    seen = set()
    for rule in RULES:
        key = (rule.path, rule.message)
        if key in seen:
            continue
        seen.add(key)
        where = ".".join(rule.path) or "(object)"
        out.append(f"| `{where}` | {_cell(rule.message)} |")
    out += [
        "",
        "## status",
        "",
        "Written by the operator only (the status subresource); GitOps tools own `spec`.",
        "",
        *_table(schema, "status"),
        "",
    ]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vllm_operator.tools.gen_docs")
    parser.add_argument("--check", action="store_true", help="verify only; exit 1 if stale")
    parser.add_argument("--root", type=Path, default=Path("."), help="repository root")
    args = parser.parse_args(argv)
    target = args.root / DOC_PATH
    text = render_reference()
    current = target.read_text(encoding="utf-8") if target.exists() else None
    if args.check:
        if current != text:
            print(
                f"{target} is stale: it differs from the API models; "
                "run `python -m vllm_operator.tools.gen_docs` and commit the result",
                file=sys.stderr,
            )
            return 1
        return 0
    if current != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
