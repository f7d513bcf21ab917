"""The generated CRD: structural, documented, CEL identical to the Python rules, committed."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from vllm_operator.api.crd import CRD_FILENAME, build_crd, build_openapi_schema, crd_yaml
from vllm_operator.api.rules import RULES
from vllm_operator.commands import crds as crds_command
from vllm_operator.tools import gen_crds

REPO = Path(__file__).resolve().parents[2]
SCHEMA = build_openapi_schema()
FORBIDDEN_KEYS = {"$ref", "$defs", "anyOf", "oneOf", "allOf", "not", "title", "const", "nullable"}


def _walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from _walk(sub, f"{path}.{name}")
    if "items" in node:
        yield from _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}{{}}")


def _node(path: tuple[str, ...]) -> dict[str, Any]:
    node = SCHEMA
    for name in path:
        node = node["properties"][name]
    return node


def test_schema_is_structural() -> None:
    for path, node in _walk(SCHEMA):
        assert not FORBIDDEN_KEYS & node.keys(), path
        assert "type" in node, path
        if "properties" in node:
            assert node["type"] == "object", path
            # properties and additionalProperties are mutually exclusive in Kubernetes.
            assert "additionalProperties" not in node, path
        if "default" in node:
            assert isinstance(node["default"], bool | int | float | str), path


def test_every_property_has_a_description() -> None:
    undocumented = [
        f"{path}.{name}"
        for path, node in _walk(SCHEMA)
        for name, sub in node.get("properties", {}).items()
        if not sub.get("description")
    ]
    # The API server refuses anything but `type: object` on the root metadata, even a description.
    assert undocumented == [".metadata"]


def test_metadata_is_left_to_the_api_server() -> None:
    assert SCHEMA["properties"]["metadata"] == {"type": "object"}
    assert SCHEMA["required"] == ["spec"]


def test_numeric_constraints_use_the_kubernetes_form() -> None:
    gpu_mem = _node(("spec", "engine", "gpuMemoryUtilization"))
    assert gpu_mem == {
        "type": "number",
        "minimum": 0,
        "exclusiveMinimum": True,
        "maximum": 1,
        "description": gpu_mem["description"],
    }
    queue = _node(("spec", "budgets", "queue", "maxRequests"))
    assert queue["minimum"] == 1
    assert "vLLM accepts 0 but then refuses every request" in queue["description"]
    assert _node(("spec", "engine", "schedulingPolicy"))["enum"] == ["fcfs", "priority"]
    assert _node(("spec", "autotune", "mode"))["enum"] == ["Off", "Recommend", "Auto"]
    assert _node(("spec", "autotune", "mode"))["default"] == "Off"
    assert _node(("spec", "replicas"))["default"] == 1
    assert "pattern" in _node(("spec", "slo", "ttftP95"))


def test_lists_and_strings_that_cel_reads_are_bounded() -> None:
    extra = _node(("spec", "engine", "extraArgs"))
    assert (extra["maxItems"], extra["items"]["maxLength"]) == (64, 256)
    env = _node(("spec", "engine", "env"))
    assert env["maxItems"] == 64
    assert env["items"]["properties"]["name"]["maxLength"] == 256
    assert env["items"]["maxProperties"] == 2  # name and one of value, valueFrom
    source = env["items"]["properties"]["valueFrom"]
    assert (source["minProperties"], source["maxProperties"]) == (1, 1)
    assert sorted(source["properties"]) == [
        "configMapKeyRef",
        "fieldRef",
        "resourceFieldRef",
        "secretKeyRef",
    ]
    assert "x-kubernetes-preserve-unknown-fields" not in source
    assert _node(("spec", "gpu", "fallbackTypes"))["maxItems"] == 8


def test_cel_rules_carry_the_python_messages_at_their_paths() -> None:
    for rule in RULES:
        node = _node(rule.path)
        entries = (node["items"] if rule.each else node)["x-kubernetes-validations"]
        expected = {"rule": rule.cel, "message": rule.message}
        if rule.field_path is not None:
            expected["fieldPath"] = rule.field_path
        if rule.message_expression is not None:
            expected["messageExpression"] = rule.message_expression
        assert expected in entries, rule.message
    emitted = [v for _, node in _walk(SCHEMA) for v in node.get("x-kubernetes-validations", [])]
    assert len(emitted) == len(RULES)


def test_cel_field_paths_exist_in_the_schema() -> None:
    for rule in RULES:
        if rule.field_path is None:
            continue
        node = _node(rule.path)
        for name in rule.field_path.lstrip(".").split("."):
            node = node["properties"][name]


def test_extra_args_rules_are_one_per_flag_group() -> None:
    node = _node(("spec", "engine", "extraArgs"))
    assert "x-kubernetes-validations" not in node
    entries = node["items"]["x-kubernetes-validations"]
    assert all(e["rule"].startswith("!self.matches('^") for e in entries)
    assert {
        "rule": "!self.matches('^(--max[-_]num[-_]se(q(s)?)?([=.].*)?)$')",
        "message": (
            "spec.engine.extraArgs may not set vLLM's --max-num-seqs in any spelling; "
            "spec.budgets.running.maxSeqs owns it"
        ),
        "messageExpression": (
            "'\"' + self + '\" is vLLM\\'s --max-num-seqs, which spec.budgets.running.maxSeqs owns'"
        ),
    } in entries


def test_status_conditions_merge_by_type() -> None:
    conditions = _node(("status", "conditions"))
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert "type" in conditions["items"]["required"]


def test_crd_names_subresources_and_columns() -> None:
    crd = build_crd()
    assert crd["metadata"]["name"] == "vllmservices.serving.vllmop.io"
    spec = crd["spec"]
    assert spec["group"] == "serving.vllmop.io"
    assert spec["scope"] == "Namespaced"
    assert spec["names"] == {
        "kind": "VLLMService",
        "listKind": "VLLMServiceList",
        "plural": "vllmservices",
        "singular": "vllmservice",
        "shortNames": ["vllmsvc"],
        "categories": ["vllm"],
    }
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    }
    columns = {
        c["name"]: (c["type"], c["jsonPath"], c.get("priority", 0))
        for c in version["additionalPrinterColumns"]
    }
    assert columns == {
        "Model": ("string", ".spec.model", 0),
        "GPU": ("string", ".status.gpu.resolvedType", 1),
        "Desired": ("integer", ".status.replicas", 1),
        "Ready-Replicas": ("integer", ".status.readyReplicas", 0),
        "Ready": ("string", '.status.conditions[?(@.type=="Ready")].status', 0),
        "Mode": ("string", ".status.tuning.mode", 0),
        "503-Ratio": ("number", ".status.metrics.rejectionRatio", 0),
        "TTFT-P95": ("number", ".status.metrics.ttftP95Seconds", 0),
        "Reason": ("string", ".status.tuning.lastDecisions[-1:].reason", 0),
        "Age": ("date", ".metadata.creationTimestamp", 0),
    }
    # every column's path is a field of the schema (a typo would print an empty column)
    for column in version["additionalPrinterColumns"]:
        path = column["jsonPath"].split("[")[0].lstrip(".").split(".")
        if path[0] != "metadata":
            assert _node(tuple(path))["type"] in ("string", "integer", "number", "array")
    # The scale subresource paths point at integer/string fields of the schema.
    assert _node(("spec", "replicas"))["type"] == "integer"
    assert _node(("status", "replicas"))["type"] == "integer"
    assert _node(("status", "selector"))["type"] == "string"


def test_yaml_is_deterministic_and_parses_back() -> None:
    text = crd_yaml()
    assert text == crd_yaml()
    assert yaml.safe_load(text) == build_crd()


def test_committed_crd_is_up_to_date() -> None:
    committed = REPO / "crds" / CRD_FILENAME
    assert committed.read_text(encoding="utf-8") == crd_yaml(), (
        "crds/ is stale: run `python -m vllm_operator.tools.gen_crds`"
    )
    assert gen_crds.main(["--check", "--root", str(REPO)]) == 0


def test_gen_crds_writes_checks_and_copies_into_the_chart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gen_crds.main(["--check", "--root", str(tmp_path)]) == 1
    assert "crds/serving.vllmop.io_vllmservices.yaml is stale" in capsys.readouterr().err

    (tmp_path / "charts" / "vllm-operator" / "crds").mkdir(parents=True)
    assert gen_crds.main(["--root", str(tmp_path)]) == 0
    for target in ("crds", "charts/vllm-operator/crds"):
        assert (tmp_path / target / CRD_FILENAME).read_text(encoding="utf-8") == crd_yaml()
    assert gen_crds.main(["--check", "--root", str(tmp_path)]) == 0

    (tmp_path / "charts/vllm-operator/crds" / CRD_FILENAME).write_text("edited\n")
    assert gen_crds.main(["--check", "--root", str(tmp_path)]) == 1
    assert "charts/vllm-operator/crds" in capsys.readouterr().err


def test_crds_command_prints_the_crd(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    crds_command.add_arguments(parser)
    assert crds_command.run(parser.parse_args([])) == 0
    assert capsys.readouterr().out == crd_yaml()


def test_every_field_is_documented_for_kubectl_explain() -> None:
    undocumented: list[str] = []

    def walk(node: dict[str, Any], path: str) -> None:
        for name, sub in (node.get("properties") or {}).items():
            if not sub.get("description") and f"{path}.{name}" != ".metadata":
                undocumented.append(f"{path}.{name}")
            walk(sub, f"{path}.{name}")
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                walk(node[key], f"{path}[]")

    walk(build_openapi_schema(), "")
    assert undocumented == []
