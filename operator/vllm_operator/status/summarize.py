"""Observed children -> VLLMService status (pure).

Ready follows kstatus: True only when the Deployment has seen the newest pod template and every
desired replica is updated and ready. Progressing is True while a rollout is under way. Degraded
says why the service cannot get there on its own (no node fits, containers crash-looping, bad
GPU type, deadline passed).

Stalled is kstatus' own abnormal-true condition, so Flux `wait: true` and other kstatus users
fail fast instead of waiting out their timeout. kstatus reads Ready=False as InProgress, which is
right for pods that load a model or wait for a GPU to free, and wrong for a spec no retry will
fix: Stalled is Degraded minus Unschedulable and CrashLoopBackOff (capacity may come, a crashed
server may stay up once restarted; the Deployment's own progress deadline turns a lasting wait
during a rollout into ProgressDeadlineExceeded, which stalls).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vllm_operator import constants as c
from vllm_operator.status.conditions import set_condition, transitions

OWN_CONDITIONS = (c.COND_READY, c.COND_PROGRESSING, c.COND_DEGRADED, c.COND_STALLED)


@dataclass(frozen=True)
class Observed:
    """What the reconcile saw of the children this round (None: not created / not applicable)."""

    deployment: dict[str, Any] | None
    unschedulable_message: str | None = None  # the scheduler's message for a Pending pod
    crash_loop_message: str | None = None  # containers the kubelet restarts in back-off
    problem: tuple[str, str] | None = None  # (reason, message) that stops rendering
    gpu: dict[str, Any] | None = None  # status.gpu (status/gpu.py); None: not known this pass


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


# (type, is True, reason, message) of one condition this controller owns
Verdict = tuple[str, bool, str, str]


def _ready(r: Rollout) -> Verdict:
    if r.desired == 0:
        return (c.COND_READY, True, c.REASON_SCALED_TO_ZERO, "Scaled to zero replicas.")
    counts = f"{r.ready}/{r.desired} replicas ready"
    if r.rolled and r.ready >= r.desired:
        return (c.COND_READY, True, c.REASON_AVAILABLE, f"{counts}.")
    if r.rolled:
        return (c.COND_READY, False, c.REASON_NOT_READY, f"{counts}.")
    # ready pods of an older spec do not make the current one ready
    message = f"{counts}, {r.updated}/{r.desired} on the current spec."
    return (c.COND_READY, False, c.REASON_NOT_READY, message)


def _rollout_pace(dep: dict[str, Any]) -> str:
    """How the Deployment replaces pods (docs/rollouts.md §3), as the end of a sentence."""
    rolling = dep.get("spec", {}).get("strategy", {}).get("rollingUpdate") or {}
    surge, unavailable = rolling.get("maxSurge"), rolling.get("maxUnavailable")
    if surge == 1 and unavailable == 0:
        return ", each new pod ready before an old one stops"
    if isinstance(surge, int) and surge > 1 and unavailable == 0:
        return f", {surge} new pods at a time, each ready before an old one stops"
    if surge == 0 and unavailable == 1:
        return ", one pod at a time (no GPU was free for a surge pod)"
    return ""


def _progressing(r: Rollout, dep: dict[str, Any]) -> Verdict:
    if r.rolled:
        return (c.COND_PROGRESSING, False, c.REASON_STABLE, "The pods run the current spec.")
    message = f"Rolling out: {r.updated}/{r.desired} replicas updated{_rollout_pace(dep)}."
    return (c.COND_PROGRESSING, True, c.REASON_ROLLING_OUT, message)


def _degraded_and_stalled(dep: dict[str, Any], observed: Observed) -> list[Verdict]:
    progress = _deployment_condition(dep, "Progressing") or {}
    deadline = progress.get("reason") == c.REASON_DEADLINE
    deadline_message = str(progress.get("message", ""))
    healthy = "No problem observed."
    unschedulable, crash_loop = observed.unschedulable_message, observed.crash_loop_message
    if unschedulable:  # the scheduler's words say more than the deadline's
        degraded: Verdict = (c.COND_DEGRADED, True, c.REASON_UNSCHEDULABLE, unschedulable)
    elif crash_loop:  # and so do the kubelet's
        degraded = (c.COND_DEGRADED, True, c.REASON_CRASH_LOOP, crash_loop)
    elif deadline:
        degraded = (c.COND_DEGRADED, True, c.REASON_DEADLINE, deadline_message)
    else:
        degraded = (c.COND_DEGRADED, False, c.REASON_HEALTHY, healthy)
    if deadline:
        why = unschedulable or crash_loop or deadline_message
        stalled: Verdict = (c.COND_STALLED, True, c.REASON_DEADLINE, why)
    elif unschedulable:
        stalled = (c.COND_STALLED, False, c.REASON_UNSCHEDULABLE, "Waiting for a node that fits.")
    elif crash_loop:
        wait = "Waiting for the restarted containers to stay up."
        stalled = (c.COND_STALLED, False, c.REASON_CRASH_LOOP, wait)
    else:
        stalled = (c.COND_STALLED, False, c.REASON_HEALTHY, healthy)
    return [degraded, stalled]


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

    Only Ready, Progressing, Degraded and Stalled: the tuner owns its own condition entries
    (conditions are a map-list keyed by type), and re-applying its entries from here could undo
    a newer write.
    """
    out: dict[str, Any] = {"observedGeneration": generation, "selector": selector}
    if effective is not None:
        out["effective"] = effective
    if observed.gpu is not None:
        out["gpu"] = observed.gpu
    dep = observed.deployment or {}
    rollout = read_rollout(dep)
    if observed.problem is not None:
        # Nothing new is applied; what still runs (the last good spec's pods) is counted.
        reason, message = observed.problem
        verdicts = [
            (type_, type_ in (c.COND_DEGRADED, c.COND_STALLED), reason, message)
            for type_ in OWN_CONDITIONS
        ]
        if observed.deployment is None:
            rollout = Rollout(desired=0, current=0, updated=0, ready=0, rolled=True)
    else:
        verdicts = [
            _ready(rollout),
            _progressing(rollout, dep),
            *_degraded_and_stalled(dep, observed),
        ]
    out.update(
        replicas=rollout.desired, readyReplicas=rollout.ready, updatedReplicas=rollout.updated
    )
    conds = [x for x in previous.get("conditions") or [] if x.get("type") in OWN_CONDITIONS]
    for type_, is_true, reason, message in verdicts:
        conds = set_condition(
            conds,
            type=type_,
            status="True" if is_true else "False",
            reason=reason,
            message=message,
            generation=generation,
            now=now,
        )
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


def newsworthy(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The condition transitions worth an Event.

    Not Progressing: every rollout flips it, and Ready and Degraded carry the news. Not a problem
    condition that first appears already clear (Degraded or Stalled False on the first pass):
    "no problem" is not news, and it would cost a thousand services two writes each. Nor Ready
    first appearing False only because the new pods are still starting (ReplicasNotReady):
    every create begins so, and Ready=True follows; a cause (a refused child, a bad spec) has a
    reason of its own and is still posted.
    """
    had = {str(x.get("type")) for x in before}
    problems = (c.COND_DEGRADED, c.COND_STALLED)

    def first_and_expected(cond: dict[str, Any]) -> bool:
        if cond["type"] in had or cond["status"] != "False":
            return False
        starting = cond["type"] == c.COND_READY and cond["reason"] == c.REASON_NOT_READY
        return cond["type"] in problems or starting

    return [
        cond
        for cond in transitions(before, after)
        if cond["type"] != c.COND_PROGRESSING and not first_and_expected(cond)
    ]
