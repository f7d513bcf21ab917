"""Careless and hostile VLLMService objects: each example with one value, key or entry changed.

One generator feeds two tiers: the unit tier checks that `vllm-operator render` answers every
object with manifests or one-line errors (never a traceback), and the integration tier checks
that the API server, given the same object, reaches the same verdict. `mutate(rng)` draws from a
`random.Random`, so a seed fixes the sample; Hypothesis drives it through `st.randoms()`.
"""

from __future__ import annotations

import copy
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


def _parent(obj: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        obj = obj[part]
    return obj


def mutate(rng: random.Random) -> tuple[str, dict[str, Any]]:
    """(what was changed, the object). Metadata stays valid unless the change is to it."""
    obj = copy.deepcopy(rng.choice(EXAMPLES))
    spec_paths = _paths(obj["spec"], ("spec",))
    kind = rng.choice(("replace", "replace", "replace", "add", "delete", "env", "namespace"))
    if kind == "namespace":
        namespace = rng.choice(HOSTILE_NAMESPACES)
        obj["metadata"]["namespace"] = namespace
        return f"metadata.namespace={namespace!r}", obj
    if kind == "env":
        entry = rng.choice(HOSTILE_ENV)
        obj["spec"].setdefault("engine", {}).setdefault("env", []).append(copy.deepcopy(entry))
        return f"spec.engine.env+={entry!r}", obj
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
