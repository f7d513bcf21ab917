"""Write (or, with --check, verify) the generated docs: docs/crd-reference.md from the
VLLMService models, and the reason table of docs/tuning.md from tuning/reasons.py.

    python -m vllm_operator.tools.gen_docs [--check] [--root DIR]

Every field's text is its `Field(description=...)`, read from the same structural schema that
the CRD carries (so `kubectl explain` and this page say the same); the cross-field rules are
listed with the message the API server returns. docs/tuning.md is written by hand except between
its reason-table markers. --check writes nothing and exits 1 when a page is stale.
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
from vllm_operator.tuning.reasons import Reason

DOC_PATH: Final = Path("docs/crd-reference.md")
TUNING_PATH: Final = Path("docs/tuning.md")
REASONS_BEGIN: Final = (
    "<!-- BEGIN reasons: generated from vllm_operator/tuning/reasons.py by "
    "`python -m vllm_operator.tools.gen_docs`; do not edit -->"
)
REASONS_END: Final = "<!-- END reasons -->"


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


def render_reason_table() -> list[str]:
    lines = ["| reason | action | meaning |", "|---|---|---|"]
    lines += [f"| `{r.value}` | `{r.kind}` | {_cell(r.meaning)} |" for r in Reason]
    return lines


def render_tuning(current: str) -> str:
    """docs/tuning.md with the block between the reason markers regenerated."""
    head, begin, rest = current.partition(REASONS_BEGIN)
    _, end, tail = rest.partition(REASONS_END)
    if not begin or not end:
        raise SystemExit(
            f"{TUNING_PATH} lacks the reason-table markers {REASONS_BEGIN!r} ... "
            f"{REASONS_END!r}: put them back where the table goes"
        )
    return "\n".join([head + begin, *render_reason_table(), end + tail])


def _sync(target: Path, text: str, *, check: bool) -> bool:
    """Write `text` to `target` (or, with check, compare only); False when it was stale."""
    current = target.read_text(encoding="utf-8") if target.exists() else None
    if current == text:
        return True
    if check:
        print(
            f"{target} is stale: it differs from what the code generates; "
            "run `python -m vllm_operator.tools.gen_docs` and commit the result",
            file=sys.stderr,
        )
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target}")
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vllm_operator.tools.gen_docs")
    parser.add_argument("--check", action="store_true", help="verify only; exit 1 if stale")
    parser.add_argument("--root", type=Path, default=Path("."), help="repository root")
    args = parser.parse_args(argv)
    tuning = args.root / TUNING_PATH
    pages = (
        (args.root / DOC_PATH, render_reference()),
        (tuning, render_tuning(tuning.read_text(encoding="utf-8"))),
    )
    fresh = [_sync(target, text, check=args.check) for target, text in pages]
    return 0 if all(fresh) else 1


if __name__ == "__main__":
    sys.exit(main())
