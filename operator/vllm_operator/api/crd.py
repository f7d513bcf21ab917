"""VLLMService models -> apiextensions.k8s.io/v1 CustomResourceDefinition (a plain dict).

Pydantic's JSON schema is close to what Kubernetes wants but not structural: it uses $ref/$defs,
anyOf-with-null for optional fields, draft-2020 numeric exclusiveMinimum, `const`, titles, and
additionalProperties booleans. `build_openapi_schema` rewrites it into a structural schema; the
cross-field rules of `rules.RULES` are attached as x-kubernetes-validations at their paths.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from vllm_operator.api.rules import RULES, Rule
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.constants import GROUP, KIND, PLURAL, SHORT_NAME, SINGULAR, VERSION

CRD_NAME: Final = f"{PLURAL}.{GROUP}"
CRD_FILENAME: Final = f"{GROUP}_{PLURAL}.yaml"

_DROPPED: Final = frozenset({"title", "$defs"})
_SCALARS: Final = (bool, int, float, str)


class SchemaError(ValueError):
    """The models produced a schema shape that has no structural equivalent."""


def _merge_ref(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    # A field's own keys (its description, above all) win over the referenced model's.
    ref = node["$ref"]
    target = defs[ref.removeprefix("#/$defs/")]
    siblings = {k: v for k, v in node.items() if k != "$ref"}
    return {**target, **siblings}


def _drop_null(node: dict[str, Any]) -> dict[str, Any]:
    options = [o for o in node["anyOf"] if o != {"type": "null"}]
    if len(options) != 1:
        raise SchemaError(f"union types have no structural schema: {node['anyOf']}")
    siblings = {k: v for k, v in node.items() if k != "anyOf"}
    return {**options[0], **siblings}


def _structural(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node or "anyOf" in node:
        node = _merge_ref(node, defs) if "$ref" in node else _drop_null(node)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "default":
            # Only scalar defaults: object/list defaults would make the API server create
            # objects the user never wrote, and None means "omitted" which is no default.
            if isinstance(value, _SCALARS):
                out["default"] = value
        elif key == "const":
            out["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            # Kubernetes' OpenAPI v3 uses the draft-4 form: a bound plus a boolean.
            out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
            out[key] = True
        elif key == "properties":
            out[key] = {name: _structural(sub, defs) for name, sub in value.items()}
        elif key == "items":
            out[key] = _structural(value, defs)
        elif key == "additionalProperties":
            # false: unknown fields are pruned (or refused with strict field validation);
            # true: an open map, said explicitly with preserve-unknown-fields where wanted.
            if isinstance(value, dict):
                out[key] = _structural(value, defs)
        else:
            out[key] = value
    return out


def _node_at(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    node = schema
    for name in path:
        try:
            node = node["properties"][name]
        except KeyError:
            raise SchemaError(f"rule path {'.'.join(path)} is not in the schema") from None
    return node


def _validation(rule: Rule) -> dict[str, str]:
    entry = {"rule": rule.cel, "message": rule.message}
    if rule.field_path is not None:
        entry["fieldPath"] = rule.field_path
    if rule.message_expression is not None:
        entry["messageExpression"] = rule.message_expression
    return entry


def build_openapi_schema() -> dict[str, Any]:
    """The structural openAPIV3Schema of VLLMService, with the CEL rules attached."""
    raw = VLLMService.model_json_schema(by_alias=True, mode="validation")
    schema = _structural(raw, raw.get("$defs", {}))
    # The API server owns metadata's schema; anything beyond `type: object` is refused.
    schema["properties"]["metadata"] = {"type": "object"}
    for key in ("apiVersion", "kind"):
        prop = schema["properties"][key]
        schema["properties"][key] = {"type": "string", "description": prop["description"]}
    for rule in RULES:
        node = _node_at(schema, rule.path)
        if rule.each:
            node = node["items"]
        node.setdefault("x-kubernetes-validations", []).append(_validation(rule))
    return schema


def _printer_columns() -> list[dict[str, Any]]:
    """`kubectl get` shows readiness and the tuner; `-o wide` adds the GPU type and desired count.

    The tuner's figures are what an operator on call looks at first: the mode in force, the
    share of requests refused with 503, TTFT p95, and why the last decision was taken.
    """
    wide = {"priority": 1}
    return [
        {"name": "Model", "type": "string", "jsonPath": ".spec.model"},
        {"name": "GPU", "type": "string", "jsonPath": ".status.gpu.resolvedType", **wide},
        {"name": "Desired", "type": "integer", "jsonPath": ".status.replicas", **wide},
        {"name": "Ready-Replicas", "type": "integer", "jsonPath": ".status.readyReplicas"},
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        },
        {"name": "Mode", "type": "string", "jsonPath": ".status.tuning.mode"},
        {"name": "503-Ratio", "type": "number", "jsonPath": ".status.metrics.rejectionRatio"},
        {"name": "TTFT-P95", "type": "number", "jsonPath": ".status.metrics.ttftP95Seconds"},
        {
            "name": "Reason",
            "type": "string",
            "jsonPath": ".status.tuning.lastDecisions[-1:].reason",
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


def build_crd() -> dict[str, Any]:
    """The VLLMService CustomResourceDefinition."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": [SHORT_NAME],
                "categories": ["vllm"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": build_openapi_schema()},
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                            "labelSelectorPath": ".status.selector",
                        },
                    },
                    "additionalPrinterColumns": _printer_columns(),
                }
            ],
        },
    }


def crd_yaml() -> str:
    """The CRD as YAML text; keys sorted so the committed file only changes with the models."""
    header = "# Generated from vllm_operator.api by `python -m vllm_operator.tools.gen_crds`.\n"
    header += "# Do not edit: change the models and regenerate.\n"
    body = yaml.safe_dump(build_crd(), sort_keys=True, width=100, default_flow_style=False)
    return header + "---\n" + body
