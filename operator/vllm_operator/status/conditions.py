"""Kubernetes-style conditions, kstatus-compatible, with cert-manager's transition semantics."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

ConditionStatus = Literal["True", "False", "Unknown"]


def format_time(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(
    conditions: list[dict[str, Any]],
    *,
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    generation: int,
    now: datetime,
) -> list[dict[str, Any]]:
    """Return a new list with `type` set; lastTransitionTime moves only when the status flips."""
    previous = next((c for c in conditions if c.get("type") == type), None)
    transitioned = previous is None or previous.get("status") != status
    updated = {
        "type": type,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": format_time(now)
        if transitioned or previous is None
        else previous.get("lastTransitionTime", format_time(now)),
    }
    others = [c for c in conditions if c.get("type") != type]
    return sorted([*others, updated], key=lambda c: str(c.get("type")))


def find_condition(conditions: list[dict[str, Any]], type: str) -> dict[str, Any] | None:
    return next((c for c in conditions if c.get("type") == type), None)


def transitions(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Conditions whose status or reason changed: the ones worth an Event."""
    out = []
    for cond in after:
        old = find_condition(before, str(cond["type"]))
        if (
            old is None
            or old.get("status") != cond["status"]
            or old.get("reason") != cond["reason"]
        ):
            out.append(cond)
    return out
