"""The API server's audit log (writes only, metadata level: e2e/audit-policy.yaml), read from a
mark on: who wrote what, to which object, with which field manager (in the request URI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.kube import _cluster_env


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size

    def events(self, username: str | None = None) -> list[dict[str, Any]]:
        """Every event since the mark, or only those of `username`."""
        out = []
        with self.path.open("rb") as f:
            f.seek(self.offset)
            for line in f:
                if username is not None and username.encode() not in line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # a line still being written
                if username is None or event.get("user", {}).get("username") == username:
                    out.append(event)
        return out

    def writes(self, namespace: str, resource: str, field_manager: str) -> list[dict[str, Any]]:
        """The answered writes to `resource` in `namespace` under `field_manager`."""
        return [
            e
            for e in self.events()
            if e.get("stage") == "ResponseComplete"
            and e.get("objectRef", {}).get("namespace") == namespace
            and e.get("objectRef", {}).get("resource") == resource
            and not e.get("objectRef", {}).get("subresource")
            and f"fieldManager={field_manager}" in e.get("requestURI", "")
        ]


def audit_log_path() -> Path:
    return Path(_cluster_env()["VLLMOP_AUDIT_LOG"])
