"""Observed children -> VLLMService status (pure).

Ready follows kstatus: True only when the Deployment has seen the newest pod template and every
desired replica is updated and ready. Progressing is True while a rollout is under way. Degraded
says why the service cannot get there on its own (no node fits, bad GPU type, deadline passed).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vllm_operator import constants as c
from vllm_operator.status.conditions import set_condition

OWN_CONDITIONS = (c.COND_READY, c.COND_PROGRESSING, c.COND_DEGRADED)


@dataclass(frozen=True)
class Observed:
    """What the reconcile saw of the children this round (None: not created / not applicable)."""

    deployment: dict[str, Any] | None
    unschedulable_message: str | None = None  # the scheduler's message for a Pending pod
    problem: tuple[str, str] | None = None  # (reason, message) that stops rendering


@dataclass(frozen=True)
class Rollout:
    """A Deployment's replica counts, and whether every replica runs the current template."""

    desired: int
    current: int
    updated: int
    ready: int
    rolled: bool


def read_rollout(dep: dict[str, Any]) -> Rollout:
    """Shared by status (Progressing) and the tuner (hold still while a rollout runs)."""
    spec, st = dep.get("spec", {}), dep.get("status", {})
    desired = int(spec.get("replicas", 1))
    current, updated = int(st.get("replicas", 0)), int(st.get("updatedReplicas", 0))
    seen = int(st.get("observedGeneration", 0)) >= int(dep.get("metadata", {}).get("generation", 1))
    return Rollout(
        desired=desired,
        current=current,
        updated=updated,
        ready=int(st.get("readyReplicas", 0)),
        rolled=seen and updated >= desired and current == updated,
    )


def _deployment_condition(dep: dict[str, Any], type_: str) -> dict[str, Any] | None:
    conds = dep.get("status", {}).get("conditions") or []
    return next((x for x in conds if x.get("type") == type_), None)


def summarize_status(
    *,
    generation: int,
    previous: dict[str, Any],
    observed: Observed,
    effective: dict[str, Any] | None,
    selector: str,
    now: datetime,
) -> dict[str, Any]:
    """The status fields this controller owns (field manager vllm-operator-status).

    Only Ready, Progressing and Degraded: the tuner owns its own condition entries (conditions
    are a map-list keyed by type), and re-applying its entries from here could undo a newer write.
    """
    conds = [x for x in previous.get("conditions") or [] if x.get("type") in OWN_CONDITIONS]

    def put(type_: str, status: bool, reason: str, message: str) -> None:
        nonlocal conds
        conds = set_condition(
            conds,
            type=type_,
            status="True" if status else "False",
            reason=reason,
            message=message,
            generation=generation,
            now=now,
        )

    out: dict[str, Any] = {"observedGeneration": generation, "selector": selector}
    if effective is not None:
        out["effective"] = effective

    dep = observed.deployment or {}
    rollout = read_rollout(dep)
    desired, updated, ready, rolled = (
        rollout.desired,
        rollout.updated,
        rollout.ready,
        rollout.rolled,
    )
    if observed.problem is not None:
        # Nothing new is applied; what still runs (the last good spec's pods) is counted.
        reason, message = observed.problem
        put(c.COND_READY, False, reason, message)
        put(c.COND_PROGRESSING, False, reason, message)
        put(c.COND_DEGRADED, True, reason, message)
        if observed.deployment is None:
            desired = ready = updated = 0
        out.update(replicas=desired, readyReplicas=ready, updatedReplicas=updated)
        out["conditions"] = conds
        return out
    out.update(replicas=desired, readyReplicas=ready, updatedReplicas=updated)

    progress = _deployment_condition(dep, "Progressing")
    deadline = progress is not None and progress.get("reason") == c.REASON_DEADLINE
    if desired == 0:
        put(c.COND_READY, True, c.REASON_SCALED_TO_ZERO, "Scaled to zero replicas.")
    elif rolled and ready >= desired:
        put(c.COND_READY, True, c.REASON_AVAILABLE, f"{ready}/{desired} replicas ready.")
    else:
        put(c.COND_READY, False, c.REASON_NOT_READY, f"{ready}/{desired} replicas ready.")

    if rolled:
        put(c.COND_PROGRESSING, False, c.REASON_STABLE, "The pods run the current spec.")
    else:
        put(
            c.COND_PROGRESSING,
            True,
            c.REASON_ROLLING_OUT,
            f"Rolling out: {updated}/{desired} replicas updated.",
        )

    if observed.unschedulable_message:
        put(c.COND_DEGRADED, True, c.REASON_UNSCHEDULABLE, observed.unschedulable_message)
    elif deadline:
        put(
            c.COND_DEGRADED,
            True,
            c.REASON_DEADLINE,
            str(progress.get("message", "")) if progress else "",
        )
    else:
        put(c.COND_DEGRADED, False, c.REASON_HEALTHY, "No problem observed.")
    out["conditions"] = conds
    return out


def status_changed(previous: dict[str, Any], new: dict[str, Any]) -> bool:
    """True when applying `new` would change what the API server stores for our fields."""
    for key, value in new.items():
        old = previous.get(key)
        if key == "conditions":
            mine = [x for x in old or [] if x.get("type") in OWN_CONDITIONS]
            if mine != value:
                return True
        elif old != value:
            return True
    return False
