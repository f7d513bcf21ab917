"""Careless and hostile VLLMService objects: each example with one value, key or entry changed.

A change goes to a value an example has, or to any field of the CRD's schema (`set`: the fields no
example sets get hostile values too), with values of every type and each type's edges (an
integer written `8.0`, one past int64, a float for an integer, a string that is a flag).

One generator feeds two tiers: the unit tier checks that `vllm-operator render` answers every
object with manifests or one-line errors (never a traceback), and the integration tier checks
that the API server, given the same object, reaches the same verdict. `mutate(rng)` draws from a
`random.Random`, so a seed fixes the sample; Hypothesis drives it through `st.randoms()`.
"""

from __future__ import annotations

import copy
import itertools
import random
from pathlib import Path
from typing import Any, Final

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES: Final = [
    yaml.safe_load(p.read_text(encoding="utf-8"))
    for p in sorted((ROOT / "examples").glob("*.yaml"))
]

# Values that a careless hand or a hostile one puts where another type belongs.
HOSTILE_VALUES: Final[tuple[Any, ...]] = (
    "8",
    "yes",
    "",
    " ",
    True,
    False,
    0,
    -1,
    1,
    1.0,
    8.0,
    -0.0,
    1.5,
    2**31 - 1,
    2**31,
    2**63 - 1,
    2**63,
    -(2**63) - 1,
    10**30,
    1e308,
    "--trust-remote-code",
    "A=B",
    "x" * 300,
    "é",
    "a\nb",
    "Off",
    "64Gi",
    "500m",
    "10s",
    [],
    ["x"],
    {},
    {"unknown": 1},
    {"secretKeyRef": {"name": "s", "key": "k"}},
)
# Each schema type's edges, beside HOSTILE_VALUES, for the `set` change.
TYPED_VALUES: Final[dict[str, tuple[Any, ...]]] = {
    "integer": (2, 64, 4096.0, 2**53 + 1, 1e20, "1k"),
    "number": (0.5, 0.95, 1.0000001, -0.1, 1e-9, 2),
    "string": ("Qwen/Qwen2.5-7B", "500ms", "1.5s", "0s", "-1s", "1h", "auto", "Auto", "a b"),
    "boolean": ("true", 1),
    "array": ([""], [1], [{}]),
    "object": ({"a": "b"}, {"": 1}),
}
CRD: Final = yaml.safe_load(
    (ROOT / "crds" / "serving.vllmop.io_vllmservices.yaml").read_text(encoding="utf-8")
)
HOSTILE_NAMESPACES: Final = ("Bad_NS", "-lead", "trail-", "a" * 64, "a.b", "UPPER")
HOSTILE_ENV: Final[tuple[dict[str, Any], ...]] = (
    {"name": "A=B", "value": "x"},
    {"name": "1A", "value": "x"},
    {"name": "OK", "value": 1},
    {"name": "OK", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    {"name": "OK", "valueFrom": {}},
    {"name": "OK", "valueFrom": {"fieldRef": {"fieldPath": "spec.volumes"}}},
    {"name": "OK", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}},
    {"name": "OK", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}, "fieldRef": {}}},
    {"name": "OK", "valueFrom": {"secretKeyRef": {"name": "s"}}},
    {"name": "OK", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k", "extra": 1}}},
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value below `node` (map keys and list indexes)."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, (*prefix, index))
    return out


def _schema_paths(
    schema: dict[str, Any], prefix: tuple[Any, ...]
) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Every field below `schema` with its schema: map keys, a map's key `k`, a list's first
    entry."""
    out = [(prefix, schema)] if len(prefix) > 1 else []
    for key, sub in sorted((schema.get("properties") or {}).items()):
        out += _schema_paths(sub, (*prefix, key))
    if isinstance(schema.get("additionalProperties"), dict):
        out += _schema_paths(schema["additionalProperties"], (*prefix, "k"))
    if isinstance(schema.get("items"), dict):
        out += _schema_paths(schema["items"], (*prefix, 0))
    return out


SCHEMA_PATHS: Final = _schema_paths(
    CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"], ("spec",)
)


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    """Set `path` in `obj`, making the maps and lists on the way (replacing what is not one)."""
    for part, after in itertools.pairwise(path):
        empty: Any = [] if isinstance(after, int) else {}
        if isinstance(obj, list):
            while len(obj) <= part:
                obj.append(copy.deepcopy(empty))
            if not isinstance(obj[part], type(empty)):
                obj[part] = empty
        elif not isinstance(obj.get(part), type(empty)):
            obj[part] = empty
        obj = obj[part]
    if isinstance(obj, list):
        obj[path[-1] :] = [value]
    else:
        obj[path[-1]] = value


def _parent(obj: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        obj = obj[part]
    return obj


def mutate(rng: random.Random) -> tuple[str, dict[str, Any]]:
    """(what was changed, the object). Metadata stays valid unless the change is to it."""
    obj = copy.deepcopy(rng.choice(EXAMPLES))
    spec_paths = _paths(obj["spec"], ("spec",))
    kinds = ("replace", "replace", "replace", "add", "delete", "env", "namespace", "set", "set")
    kind = rng.choice(kinds)
    if kind == "namespace":
        namespace = rng.choice(HOSTILE_NAMESPACES)
        obj["metadata"]["namespace"] = namespace
        return f"metadata.namespace={namespace!r}", obj
    if kind == "env":
        entry = rng.choice(HOSTILE_ENV)
        obj["spec"].setdefault("engine", {}).setdefault("env", []).append(copy.deepcopy(entry))
        return f"spec.engine.env+={entry!r}", obj
    if kind == "set":
        path, schema = rng.choice(SCHEMA_PATHS)
        typed = TYPED_VALUES.get(schema.get("type", ""), ())
        value = copy.deepcopy(rng.choice((*HOSTILE_VALUES, *typed, *schema.get("enum", ()))))
        _set(obj, path, value)
        return f"set {'.'.join(map(str, path))}={value!r}", obj
    path = rng.choice(spec_paths)
    parent = _parent(obj, path)
    where = ".".join(str(p) for p in path)
    if kind == "delete":
        del parent[path[-1]]
        return f"del {where}", obj
    if kind == "add" and isinstance(parent, dict):
        parent[rng.choice(("extra", "unknownField", path[-1] + "s"))] = 1
        return f"add next to {where}", obj
    value = copy.deepcopy(rng.choice(HOSTILE_VALUES))
    parent[path[-1]] = value
    return f"{where}={value!r}", obj


def sample(seed: int, size: int) -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(seed)
    return [mutate(rng) for _ in range(size)]
