"""A pass on the operator's newest copy of a VLLMService instead of a GET of it.

Status passes (the Deployment's events, the pod watch) and the resync read the service under its
lock before they pass it: about 1,000 GETs per 300 services while a fleet starts, and one per
service per resync period when idle (docs/operator-scale.md). The copy (`Deps.services`,
k8s/versions.py) is the newest the process has seen, from the watch and from its own status
writes. It can still be older than the stored object, so a pass on it may do only what is safe
on an old copy:

- read anything (the Deployment, the pods, the nodes);
- write status: every status write carries the resourceVersion it was prepared from
  (handlers/status_write.py), so the API server refuses one prepared from an old copy, and the
  pass is prepared again from a fresh read;
- post Events, which follow a status write that landed.

Any other write (a child that drifted, a prune, the canary) would render an old spec or old tuner
overrides into the children, so it is refused before it is sent (`ChildWriteOnCopyError`) and
the pass starts again from a GET, as it did before. What a copy misses the watch brings (a spec
edit's event starts a spec pass on its own body), or, if the watch stalls, the resync's LIST.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vllm_operator.k8s.client import Kube


class ChildWriteOnCopyError(Exception):
    """A pass on a copy of the service was about to write something other than its status."""


@dataclass
class StatusWritesOnly:
    """The Kube of a pass on a copy: reads, status applies and Events pass; other writes raise."""

    inner: Kube
    writes: int = 0  # never counts: the writes that pass go through `inner`, which counts them

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.inner.get(api_version, kind, namespace, name)

    def list(
        self, api_version: str, kind: str, namespace: str | None, label_selector: str = ""
    ) -> list[dict[str, Any]]:
        return self.inner.list(api_version, kind, namespace, label_selector)

    def apply(
        self, obj: dict[str, Any], *, field_manager: str, subresource: str | None = None
    ) -> dict[str, Any]:
        if subresource != "status":
            raise ChildWriteOnCopyError(_what(obj))
        return self.inner.apply(obj, field_manager=field_manager, subresource=subresource)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        raise ChildWriteOnCopyError(_what(obj))

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        raise ChildWriteOnCopyError(_what(obj))

    def delete(self, api_version: str, kind: str, namespace: str, name: str, *, uid: str) -> None:
        raise ChildWriteOnCopyError(f"{kind} {namespace}/{name}")

    def emit_event(
        self, involved: dict[str, Any], *, type: str, reason: str, message: str, now: datetime
    ) -> None:
        self.inner.emit_event(involved, type=type, reason=reason, message=message, now=now)


def _what(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{obj.get('kind')} {meta.get('namespace')}/{meta.get('name')}"
