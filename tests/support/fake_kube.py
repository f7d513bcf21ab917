"""A recording Kubernetes client for the component tier: the handlers' I/O edge, in memory.

It satisfies vllm_operator.k8s.client.Kube, the interface the handlers are typed against, and
models just enough of the API server for reconcile and tune to run as they do against a real one:

* server-side apply per field manager: a manager's apply replaces what that manager set before,
  takes over (force) the fields it names from other managers, and leaves theirs alone; the
  object served is every manager's fields merged, with metadata.managedFields naming who owns
  what (the handlers read it to see whether the tuner owns spec.replicas); `put` of a changed
  object is another manager's update and takes over what it changed. Lists of objects
  keyed by `type` (conditions) merge by key, as the CRD's list-map does; other lists are atomic.
* the status subresource: an apply with subresource="status" sets status only; an apply of the
  main resource ignores status, as the API server does for a CRD with a status subresource.
* gets and lists served from what was applied (copies, so a handler cannot mutate the store).
* Events, creates and replaces recorded; `writes` counts every non-GET, like KubeClient.writes.
* `refuse(kind)` makes applies of that kind fail with an ApiException shaped like the real one.
* an apply that names metadata.resourceVersion fails with 409 unless it is the stored one (the
  optimistic-concurrency precondition); `put`, `set_status` and every apply move the version.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubernetes.client.exceptions import ApiException

Key = tuple[str, str, str, str]  # apiVersion, kind, namespace, name


@dataclass(frozen=True)
class Applied:
    """One apply as the handler made it."""

    obj: dict[str, Any]
    field_manager: str
    subresource: str | None

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])


@dataclass
class _Stored:
    base: dict[str, Any]  # what no manager applied: metadata the server set, a seeded object
    owned: dict[str, dict[str, Any]] = field(default_factory=dict)  # manager -> its fields
    generation: int = 1
    version: int = 1


def _fields(obj: Any) -> dict[str, Any]:
    """managedFields' fieldsV1 for `obj`: the set of fields it names."""
    if not isinstance(obj, dict):
        return {}
    return {f"f:{k}": _fields(v) for k, v in obj.items()}


def _keyed(items: Any) -> bool:
    return isinstance(items, list) and all(isinstance(i, dict) and "type" in i for i in items)


def _merge(into: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(into)
    for k, v in top.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        elif _keyed(v) and _keyed(out.get(k)):
            by_type = {i["type"]: i for i in out[k]}
            by_type.update({i["type"]: copy.deepcopy(i) for i in v})
            out[k] = sorted(by_type.values(), key=lambda i: str(i["type"]))
        else:
            out[k] = copy.deepcopy(v)
    return out


def _release(other: dict[str, Any], taken: dict[str, Any]) -> None:
    """Drop from another manager's fields those a forced apply took over."""
    for k, v in taken.items():
        if k not in other:
            continue
        if isinstance(v, dict) and isinstance(other[k], dict):
            _release(other[k], v)
            if not other[k]:
                del other[k]
        elif _keyed(v) and _keyed(other[k]):
            types = {i["type"] for i in v}
            other[k] = [i for i in other[k] if i["type"] not in types]
        else:
            del other[k]


def _changed(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """The fields of `new` whose value differs from `old`'s (a list counts as one field)."""
    out: dict[str, Any] = {}
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(old.get(k), dict):
            sub = _changed(v, old[k])
            if sub:
                out[k] = sub
        elif old.get(k) != v:
            out[k] = v
    return out


def _matches(obj: dict[str, Any], selector: str) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    wanted = [term.split("=", 1) for term in selector.split(",") if term]
    return all(labels.get(k) == v for k, v in wanted)


def api_exception(status: int, reason: str, message: str) -> ApiException:
    """What KubeClient raises for a refused request: status, reason, and the Status body."""
    exc = ApiException(status=status, reason=reason)
    exc.body = json.dumps({"kind": "Status", "status": "Failure", "message": message})
    return exc


@dataclass
class FakeKube:
    applies: list[Applied] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    deletes: list[tuple[str, str, str]] = field(default_factory=list)
    writes: int = 0
    _store: dict[Key, _Stored] = field(default_factory=dict)
    _refusals: dict[str, ApiException] = field(default_factory=dict)

    # --- what tests arrange and inspect ---

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store `obj` as if someone else wrote it (kubectl, a controller); not a handler write."""
        meta = obj["metadata"]
        key = (obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"])
        base = copy.deepcopy(obj)
        stored = self._store.get(key)
        if stored is None:
            self._store[key] = _Stored(base, generation=int(meta.get("generation", 1)))
        else:  # an update by another manager: it takes over every field it changed
            changed = _changed(base, self._render(key))
            for theirs in stored.owned.values():
                _release(theirs, changed)
            stored.base = base
            stored.version += 1
            if "spec" in changed:  # the API server moves generation with spec alone
                stored.generation += 1
        return self._render(key)

    def set_status(self, api_version: str, kind: str, namespace: str, name: str,
                   status: dict[str, Any]) -> None:  # fmt: skip
        """What a controller (the Deployment controller, kubelet) reports, not a handler."""
        stored = self._store[(api_version, kind, namespace, name)]
        stored.base["status"] = copy.deepcopy(status)
        stored.version += 1

    def refuse(self, kind: str, status: int = 403, message: str = "forbidden") -> None:
        reasons = {403: "Forbidden", 409: "Conflict", 422: "Unprocessable Entity"}
        self._refusals[kind] = api_exception(status, reasons.get(status, "Error"), message)

    def applied(self, kind: str, *, manager: str | None = None,
                subresource: str | None = None) -> list[Applied]:  # fmt: skip
        return [
            a
            for a in self.applies
            if a.kind == kind
            and (manager is None or a.field_manager == manager)
            and a.subresource == subresource
        ]

    # --- the Kube interface ---

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        key = (api_version, kind, namespace, name)
        return self._render(key) if key in self._store else None

    def list(
        self, api_version: str, kind: str, namespace: str | None, label_selector: str = ""
    ) -> list[dict[str, Any]]:
        return [
            self._render(key)
            for key in sorted(self._store)
            if key[:2] == (api_version, kind)
            and (namespace is None or key[2] == namespace)
            and _matches(self._render(key), label_selector)
        ]

    def apply(
        self, obj: dict[str, Any], *, field_manager: str, subresource: str | None = None
    ) -> dict[str, Any]:
        self.writes += 1
        self.applies.append(Applied(copy.deepcopy(obj), field_manager, subresource))
        if obj["kind"] in self._refusals:
            raise self._refusals[obj["kind"]]
        meta = obj["metadata"]
        key = (obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"])
        stored = self._store.get(key)
        version = meta.get("resourceVersion")
        if version is not None and (stored is None or str(stored.version) != version):
            # the precondition the API server checks: the object is still the one read
            raise api_exception(
                409,
                "Conflict",
                f"{obj['kind']} {meta['name']}: the object has"
                " been modified; please apply your changes to the latest version",
            )
        if stored is None:
            if subresource is not None:
                raise api_exception(404, "Not Found", f"{obj['kind']} {meta['name']} not found")
            stored = self._store[key] = _Stored({"apiVersion": key[0], "kind": key[1],
                                                 "metadata": {"namespace": key[2],
                                                              "name": key[3]}})  # fmt: skip
        if subresource == "status":
            mine = {"status": copy.deepcopy(obj.get("status") or {})}
        else:
            mine = {k: copy.deepcopy(v) for k, v in obj.items() if k != "status"}
        before = self._render(key).get("spec")
        for manager, theirs in stored.owned.items():
            if manager != self._owner(field_manager, subresource):
                _release(theirs, mine)
        stored.owned[self._owner(field_manager, subresource)] = mine
        stored.version += 1
        if self._render(key).get("spec") != before:
            stored.generation += 1
        return self._render(key)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.writes += 1
        meta = obj["metadata"]
        key = (obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"])
        if key in self._store:
            raise api_exception(409, "Conflict", f"{obj['kind']} {meta['name']} already exists")
        return self.put(obj)

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.writes += 1
        return self.put(obj)

    def delete(self, api_version: str, kind: str, namespace: str, name: str, *, uid: str) -> None:
        self.writes += 1
        self.deletes.append((kind, namespace, name))
        key = (api_version, kind, namespace, name)
        if key in self._store and self._render(key)["metadata"].get("uid", uid) == uid:
            del self._store[key]

    def emit_event(
        self, involved: dict[str, Any], *, type: str, reason: str, message: str, now: datetime
    ) -> None:
        self.writes += 1
        meta = involved["metadata"]
        self.events.append({
            "involved": (involved["kind"], meta["namespace"], meta["name"]),
            "type": type,
            "reason": reason,
            "message": message,
            "time": now,
        })  # fmt: skip

    # --- internals ---

    @staticmethod
    def _owner(field_manager: str, subresource: str | None) -> str:
        return f"{field_manager}/{subresource}" if subresource else field_manager

    def _render(self, key: Key) -> dict[str, Any]:
        stored = self._store[key]
        obj = copy.deepcopy(stored.base)
        for fields in stored.owned.values():
            obj = _merge(obj, fields)
        meta = obj.setdefault("metadata", {})
        meta.update(
            uid=f"uid-{key[1].lower()}-{key[3]}",
            generation=stored.generation,
            resourceVersion=str(stored.version),
        )
        meta["managedFields"] = [
            {
                "manager": owner.split("/")[0],
                "operation": "Apply",
                **({"subresource": owner.split("/")[1]} if "/" in owner else {}),
                "fieldsV1": {k: v for k, v in _fields(fields).items() if k != "f:metadata"}
                | {"f:metadata": _fields(fields.get("metadata", {}))},
            }
            for owner, fields in stored.owned.items()
        ]
        return obj
