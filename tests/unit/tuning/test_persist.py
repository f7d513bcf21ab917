"""status.tuning <-> TuningState: a round trip loses nothing, and the history stays bounded."""

from __future__ import annotations

from datetime import timedelta

from tests.unit.tuning.support import T0, snap, spec, state
from vllm_operator.api.status import (
    BudgetValues,
    CapacityStatus,
    PendingRetuneStatus,
    TuningDecisionRecord,
    TuningHold,
    TuningStatus,
    WindowSample,
)
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.model import (
    Action,
    Capacity,
    Decision,
    Hold,
    PendingRetune,
    RateSample,
    TuningState,
)
from vllm_operator.tuning.persist import records_anew, state_from_status, status_from_state

PENDING = PendingRetune(
    "maxRequests", 32, 64, T0 - timedelta(minutes=3), {"rejection_ratio": 0.05}, T0
)
FULL = TuningState(
    desired_replicas=3,
    overrides={"maxRequests": 64},
    last_scale_at=T0 - timedelta(minutes=7),
    last_scale_from=2,
    scale_down_votes=1,
    retune_cooldown_until=T0 + timedelta(minutes=12),
    restart_times=(T0 - timedelta(minutes=3),),
    pending=PENDING,
    holds=(Hold("maxActiveSeqs", "down", T0 + timedelta(minutes=20)),),
    capacity=Capacity(4.25, T0 - timedelta(minutes=7)),
    problem_since=T0 - timedelta(minutes=1),
    fewer_pods_looked_at=T0 - timedelta(minutes=4),
    # a pass without the engine model's figure, and one with it
    arrivals=(RateSample(T0 - timedelta(minutes=2), 3.0), RateSample(T0, 3.5, 4.0)),
)
WITHIN = Decision(Action("Hold"), "WithinSLO", "fine", {"ttft_p95": 0.3}, FULL)


def test_round_trip_through_the_wire_form() -> None:
    status = status_from_state(FULL, WITHIN, None, T0, mode="Auto")
    wire = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert state_from_status(TuningStatus.model_validate(wire), spec()) == FULL


def test_a_remembered_model_capacity_is_read_back_only_when_a_pass_could_have_given_it() -> None:
    status = status_from_state(FULL, WITHIN, None, T0, mode="Auto")
    assert [w.figures for w in status.window] == [
        {"request_rate": 3.0},
        {"request_rate": 3.5, "model_capacity": 4.0},
    ]
    for hostile in (float("nan"), 0.0, -1.0, float("inf"), 1e300):
        status.window[1].figures["model_capacity"] = hostile
        restored = state_from_status(status, spec())
        assert [(a.rate, a.capacity) for a in restored.arrivals] == [(3.0, None), (3.5, None)]


def test_status_fields() -> None:
    status = status_from_state(FULL, WITHIN, None, T0, mode="Auto")
    assert status == TuningStatus(
        mode="Auto",
        overrides=BudgetValues(max_requests=64),
        desired_replicas=3,
        last_evaluated=T0,
        last_decisions=[
            TuningDecisionRecord(
                time=T0,
                action="Hold",
                reason="WithinSLO",
                message="fine",
                applied=True,
                figures={"ttft_p95": 0.3},
            )
        ],
        restarts_in_last_hour=1,
        restart_times=[T0 - timedelta(minutes=3)],
        cooldown_until=T0 + timedelta(minutes=12),
        last_scale_time=T0 - timedelta(minutes=7),
        last_scale_from=2,
        scale_down_votes=1,
        pending=PendingRetuneStatus(
            field="maxRequests",
            from_value=32,
            to_value=64,
            applied_at=T0 - timedelta(minutes=3),
            settled_at=T0,
            before={"rejection_ratio": 0.05},
        ),
        holds=[
            TuningHold(field="maxActiveSeqs", direction="down", until=T0 + timedelta(minutes=20))
        ],
        capacity=CapacityStatus(per_pod=4.25, learned_at=T0 - timedelta(minutes=7)),
        problem_since=T0 - timedelta(minutes=1),
        fewer_pods_looked_at=T0 - timedelta(minutes=4),
        window=[
            WindowSample(time=T0 - timedelta(minutes=2), figures={"request_rate": 3.0}),
            WindowSample(time=T0, figures={"request_rate": 3.5, "model_capacity": 4.0}),
        ],
    )


def test_restart_times_keep_only_the_last_hour() -> None:
    old = TuningState(restart_times=(T0 - timedelta(minutes=61), T0 - timedelta(minutes=59)))
    status = status_from_state(old, WITHIN, None, T0)
    assert (status.restart_times, status.restarts_in_last_hour) == ([T0 - timedelta(minutes=59)], 1)


def _scale(n: int) -> Decision:
    return Decision(Action("ScaleReplicas", "replicas", n, n + 1), "ScaleUpLatency", "m", {}, FULL)


def test_history_keeps_the_newest_ten() -> None:
    status = None
    for n in range(12):
        status = status_from_state(FULL, _scale(n), status, T0 + timedelta(minutes=n))
    assert status is not None
    assert [r.from_value for r in status.last_decisions] == list(range(2, 12))


def test_repeated_holds_refresh_the_last_record_instead_of_growing() -> None:
    status = status_from_state(FULL, _scale(1), None, T0)
    for n in range(5):
        status = status_from_state(FULL, WITHIN, status, T0 + timedelta(minutes=n + 1))
    assert [(r.reason, r.time) for r in status.last_decisions] == [
        ("ScaleUpLatency", T0),
        ("WithinSLO", T0 + timedelta(minutes=5)),
    ]


def test_a_decision_is_new_exactly_when_it_adds_a_record() -> None:
    status = None
    for n, decision in enumerate([_scale(1), WITHIN, WITHIN, _scale(1), _scale(2), _scale(2)]):
        before = 0 if status is None else len(status.last_decisions)
        anew = records_anew(status, decision)
        status = status_from_state(FULL, decision, status, T0 + timedelta(minutes=n))
        assert anew == (len(status.last_decisions) > before), (n, decision.reason)


def test_mode_is_kept_when_not_given() -> None:
    first = status_from_state(FULL, WITHIN, None, T0, mode="Recommend")
    assert status_from_state(FULL, WITHIN, first, T0).mode == "Recommend"


def test_no_status_is_a_fresh_state() -> None:
    assert state_from_status(None, spec()) == TuningState(desired_replicas=2)
    assert state_from_status(None, spec(autoscaling=None)) == TuningState()


def test_outside_auto_no_override_or_pending_is_read_back() -> None:
    status = status_from_state(FULL, WITHIN, None, T0)
    restored = state_from_status(status, spec(autotune={"mode": "Recommend"}))
    assert (restored.overrides, restored.pending) == ({}, None)


def test_unknown_field_names_are_dropped() -> None:
    status = TuningStatus(
        holds=[TuningHold(field="maxBatchSize", direction="up", until=T0)],
        pending=PendingRetuneStatus(field="maxBatchSize", to_value=4, applied_at=T0),
    )
    assert (state_from_status(status, spec()).holds, state_from_status(status, spec()).pending) == (
        (),
        None,
    )


def test_operator_loop_round_trip_reproduces_the_decision() -> None:
    # What the timer does: status -> state -> decide -> status -> state; a restart in between
    # (a fresh process reading status) must not change the next decision.
    rejecting = snap(rejection_ratio=0.05, rejection_rate=0.5)
    first = decide(spec(), rejecting, state(), T0)
    status = status_from_state(first.state, first, None, T0, mode="Auto")
    restored = state_from_status(
        TuningStatus.model_validate(status.model_dump(by_alias=True)), spec()
    )
    later = T0 + timedelta(minutes=1)
    direct = decide(spec(), snap(observed_at=later), first.state, later)
    via_status = decide(spec(), snap(observed_at=later), restored, later)
    assert (restored, via_status) == (first.state, direct)
