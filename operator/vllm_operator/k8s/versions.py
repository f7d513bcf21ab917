"""Which of two copies of one object is newer, by resourceVersion.

A status pass may get its Deployment from kopf's watch event or read it with a GET, and the two
arrive out of order: the pod watch (handlers/pod_watch.py) can trigger a pass that GETs the
Deployment with 3/3 replicas ready before kopf delivers the older event with 2/3, whose pass
would then write Ready=False over Ready=True for a moment (and post a Warning Event). Since
Kubernetes 1.35 resourceVersions of one resource type are comparable (KEP-5504, "Comparable
Resource Version", stable in 1.35: a positive decimal integer without leading zeros; the longer
is the newer, and of two as long the lexicographically greater). A version that is not of that
form (an older or non-etcd API server) compares with nothing, and the copy is used as before.
"""

from __future__ import annotations

import copy
import threading
from typing import Any


def _valid(version: str) -> bool:
    return version.isdecimal() and version.isascii() and not version.startswith("0")


def compare_resource_versions(a: str, b: str) -> int | None:
    """-1, 0 or 1 as `a` is older than, the same as or newer than `b`; None when either is not
    a comparable version (client-go's CompareResourceVersion, without its error)."""
    if not (_valid(a) and _valid(b)):
        return None
    if len(a) != len(b):
        return -1 if len(a) < len(b) else 1
    return (a > b) - (a < b)


class NewestVersions:
    """The newest resourceVersion a pass has used, per (namespace, name) of one resource type.

    One entry per object the process has seen, until `forget` drops it (a service deleted: the
    operator may run for months over services that come and go). Passes run on pools, so
    entries are guarded by a lock.
    """

    def __init__(self) -> None:
        self._newest: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def note(self, obj: dict[str, Any] | None) -> None:
        """Remember `obj`'s version if it is the newest seen of its object."""
        key, version = _key_and_version(obj)
        if key is None or version is None or obj is None:
            return
        with self._lock:
            known = self._newest.get(key)
            if known is None or compare_resource_versions(version, known) == 1:
                self._newest[key] = version
                self._noted_newer(key, obj)

    def _noted_newer(self, key: tuple[str, str], obj: dict[str, Any]) -> None:
        """`obj` is now the newest of its object (called under the lock)."""

    def older_than_seen(self, obj: dict[str, Any] | None) -> bool:
        """Whether a newer copy of `obj` has been noted (False when that cannot be told)."""
        key, version = _key_and_version(obj)
        if key is None or version is None:
            return False
        with self._lock:
            known = self._newest.get(key)
        return known is not None and compare_resource_versions(version, known) == -1

    def forget(self, namespace: str, name: str) -> None:
        """Drop what was noted of one object (a recreated one starts afresh; its versions are
        newer anyway)."""
        with self._lock:
            self._newest.pop((namespace, name), None)
            self._forgot((namespace, name))

    def _forgot(self, key: tuple[str, str]) -> None:
        """`key`'s entry is gone (called under the lock)."""

    def __len__(self) -> int:
        with self._lock:
            return len(self._newest)


class NewestCopies(NewestVersions):
    """The newest copy of each object, as well as its version: what a status pass reads instead
    of GETting the VLLMService (handlers/reconcile.py `reconcile_by_name`).

    Fed by every watch event and by the objects the operator's own writes return, so it is at
    least as new as anything this process wrote. It can still be older than the stored object
    (an event on its way), which is why a pass on a copy writes no child from it. Only copies
    with comparable versions are kept: without them the newest cannot be told, and `copy_of`
    says None (the pass reads the object, as before).
    """

    def __init__(self, *, shared: bool = False) -> None:
        """`shared`: keep and hand out the objects noted as they are, not deep copies: for
        objects nobody changes (a watch's events, the API's answers) and many of them, where
        the copies cost more CPU than anything else done with them (a fleet's Deployments)."""
        super().__init__()
        self.shared = shared
        self._copies: dict[tuple[str, str], dict[str, Any]] = {}

    def _noted_newer(self, key: tuple[str, str], obj: dict[str, Any]) -> None:
        if _valid(self._newest[key]):
            # the caller's may change after, unless shared
            self._copies[key] = obj if self.shared else copy.deepcopy(obj)
        else:
            self._copies.pop(key, None)

    def _forgot(self, key: tuple[str, str]) -> None:
        self._copies.pop(key, None)

    def copy_of(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A deep copy of the newest copy noted (None: none, or none with a comparable version);
        shared: the object noted itself."""
        with self._lock:
            found = self._copies.get((namespace, name))
        return copy.deepcopy(found) if found is not None and not self.shared else found

    def newest_of(self, obj: dict[str, Any] | None) -> dict[str, Any] | None:
        """`obj`, or a copy noted since that is newer than it (None stays None: no object)."""
        key, version = _key_and_version(obj)
        if key is None or version is None:
            return obj
        newer = self.copy_of(*key)
        newer_version = _key_and_version(newer)[1]
        if newer_version is None or compare_resource_versions(newer_version, version) != 1:
            return obj
        return newer


def _key_and_version(obj: dict[str, Any] | None) -> tuple[tuple[str, str] | None, str | None]:
    meta = (obj or {}).get("metadata") or {}
    name, version = meta.get("name"), meta.get("resourceVersion")
    if not name or not isinstance(version, str):
        return None, None
    return (str(meta.get("namespace") or ""), str(name)), version
