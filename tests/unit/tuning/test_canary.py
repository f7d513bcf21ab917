"""tuning/canary.py: a canary's figures against the stable pods' over the same window."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from tests.unit.tuning.support import spec
from vllm_operator.api.status import TuningStatus
from vllm_operator.tuning.canary import (
    CanaryVerdict,
    decide_canary,
    divert_to_canary,
    judge_canary,
)
from vllm_operator.tuning.inputs import Targets
from vllm_operator.tuning.model import Action, Canary, Decision, Hold, PendingRetune, TuningState
from vllm_operator.tuning.persist import state_from_status, status_from_state
from vllm_operator.tuning.reasons import Reason
from vllm_operator.tuning.settings import TuningSettings

T0 = datetime(2026, 12, 1, 12, tzinfo=UTC)
TARGETS = Targets(ttft=0.5, itl=0.06, max_rejection_ratio=0.01)
WINDOW = timedelta(seconds=120)
RAISE = Canary("maxRequests", 32, 64, started_at=T0, ready_at=T0 + timedelta(seconds=240))
LATER = T0 + timedelta(seconds=600)


def judge(canary: Canary, on_canary: dict[str, float], on_stable: dict[str, float],
          now: datetime = LATER) -> tuple[str, str]:  # fmt: skip
    verdict = judge_canary(
        canary, on_canary, on_stable, targets=TARGETS, now=now, window=WINDOW,
        evaluation_delay=timedelta(seconds=180), deadline=timedelta(seconds=1800),
        margin=0.1, hold=timedelta(seconds=1800),
    )  # fmt: skip
    return verdict.kind, verdict.message


BUSY = {"request_rate": 1.0, "rejection_ratio": 0.05, "ttft_p95": 0.3}


def test_a_canary_that_cuts_503s_without_breaking_ttft_is_promoted() -> None:
    kind, message = judge(RAISE, {**BUSY, "rejection_ratio": 0.002, "ttft_p95": 0.35}, BUSY)
    assert kind == "Promote"
    assert message == (
        "canary queue.maxRequests 32 -> 64 held: rejection_ratio 0.2% on the canary vs 5.0%; "
        "ttft_p95 0.35s on the canary vs 0.30s; promoted"
    )


def test_a_canary_that_pushes_ttft_over_its_slo_is_removed_with_both_sides_quoted() -> None:
    kind, message = judge(RAISE, {**BUSY, "rejection_ratio": 0.0, "ttft_p95": 0.9}, BUSY)
    assert kind == "Remove"
    assert message.startswith(
        "canary queue.maxRequests 32 -> 64 made ttft_p95 0.90s on the canary vs 0.30s on the "
        "stable pods: removed, no move up for 1800s"
    )


def test_a_targeted_figure_worse_on_the_canary_removes_it() -> None:
    lower = Canary("maxActiveSeqs", 64, 32, started_at=T0, ready_at=T0)
    stable = {"request_rate": 1.0, "itl_p95": 0.07, "ttft_p95": 0.3}
    kind, _ = judge(lower, {**stable, "itl_p95": 0.09}, stable)
    assert kind == "Remove"
    kind, _ = judge(lower, {**stable, "itl_p95": 0.05}, stable)
    assert kind == "Promote"


@pytest.mark.parametrize(
    ("canary", "now", "rate", "kind", "says"),
    [
        (Canary("maxRequests", 32, 64, T0), T0 + timedelta(seconds=60), 1.0, "Wait", "starting"),
        (Canary("maxRequests", 32, 64, T0), T0 + timedelta(hours=1), 1.0, "Remove", "ready"),
        (RAISE, RAISE.ready_at + timedelta(seconds=100), 1.0, "Wait", "judged in 80s"),
        (RAISE, LATER, 0.1, "Wait", "waits for traffic"),  # 12 requests in the window
        (RAISE, T0 + timedelta(hours=1), 0.1, "Remove", "too little traffic"),
    ],
)
def test_a_canary_is_judged_only_when_ready_settled_and_busy(
    canary: Canary, now: datetime, rate: float, kind: str, says: str
) -> None:
    verdict, message = judge(canary, {**BUSY, "request_rate": rate}, BUSY, now=now)
    assert verdict == kind and says in message, message


# --- a budget move as a canary, and the passes while it runs -------------------------------

DECIDED = Decision(
    Action("SetBudget", "maxRequests", 32, 64),
    Reason.RAISE_QUEUE_REJECTIONS,
    "503s over budget: maxRequests 32 -> 64",
    {"rejection_ratio": 0.05},
    TuningState(
        overrides={"maxRequests": 64},
        restart_times=(T0,),
        pending=PendingRetune("maxRequests", 32, 64, T0, {}),
    ),
)


def test_a_budget_move_becomes_a_canary_and_the_stable_pods_keep_their_flags() -> None:
    before = TuningState(overrides={"maxActiveSeqs": 8})
    started = divert_to_canary(DECIDED, before, T0)
    assert started.reason == Reason.CANARY_STARTED
    assert started.action == DECIDED.action and started.message.endswith("on a canary pod first")
    assert started.state.overrides == {"maxActiveSeqs": 8}  # not the move
    assert started.state.pending is None
    assert started.state.restart_times == (T0,)  # the canary pod's start counts
    assert started.state.canary == Canary("maxRequests", 32, 64, started_at=T0)


def test_holds_scales_rollbacks_and_advice_are_not_diverted() -> None:
    before = TuningState()
    hold = Decision(Action("Hold"), Reason.WITHIN_SLO, "fine", {}, before)
    advice = replace(DECIDED, applied=False)
    rollback = replace(DECIDED, action=Action("Rollback", "maxRequests", 64, 32))
    for decision in (hold, advice, rollback):
        assert divert_to_canary(decision, before, T0) is decision


def test_the_verdicts_as_decisions() -> None:
    running = TuningState(overrides={"maxActiveSeqs": 8}, canary=RAISE)
    settings = TuningSettings()
    wait = decide_canary(running, CanaryVerdict("Wait", "later"), {}, LATER, settings)
    assert (wait.action.kind, wait.reason, wait.state) == ("Hold", Reason.CANARY_JUDGING, running)
    promoted = decide_canary(running, CanaryVerdict("Promote", "held"), {}, LATER, settings)
    assert promoted.action == Action("SetBudget", "maxRequests", 32, 64)
    assert promoted.state.overrides == {"maxActiveSeqs": 8, "maxRequests": 64}
    assert promoted.state.canary is None
    removed = decide_canary(running, CanaryVerdict("Remove", "worse"), {}, LATER, settings)
    assert removed.action == Action("Rollback", "maxRequests", 64, 32)
    assert removed.state.overrides == {"maxActiveSeqs": 8}
    assert removed.state.holds == (Hold("maxRequests", "up", LATER + settings.hold_after_rollback),)
    assert removed.state.canary is None


def test_a_canary_survives_the_status_round_trip_only_while_canaries_are_on() -> None:
    running = TuningState(canary=RAISE)
    record = Decision(Action("Hold"), Reason.CANARY_JUDGING, "judging", {}, running)
    wire = status_from_state(running, record, None, LATER, mode="Auto").model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    assert wire["canary"] == {
        "field": "maxRequests",
        "fromValue": 32,
        "toValue": 64,
        "startedAt": "2026-12-01T12:00:00Z",
        "readyAt": "2026-12-01T12:04:00Z",
    }
    status = TuningStatus.model_validate(wire)
    on = spec(autotune={"mode": "Auto", "canary": True})
    assert state_from_status(status, on).canary == RAISE
    off = spec(autotune={"mode": "Auto", "canary": False})
    assert state_from_status(status, off).canary is None  # the reconcile then deletes it
