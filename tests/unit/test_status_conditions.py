from datetime import UTC, datetime, timedelta

from vllm_operator.status.conditions import find_condition, set_condition, transitions

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def test_new_condition_gets_the_current_time() -> None:
    conds = set_condition(
        [], type="Ready", status="False", reason="R", message="m", generation=3, now=T0
    )
    assert conds == [
        {
            "type": "Ready",
            "status": "False",
            "reason": "R",
            "message": "m",
            "observedGeneration": 3,
            "lastTransitionTime": "2026-11-29T12:00:00Z",
        }
    ]


def test_transition_time_moves_only_when_status_flips() -> None:
    first = set_condition(
        [], type="Ready", status="False", reason="A", message="a", generation=1, now=T0
    )
    same = set_condition(
        first, type="Ready", status="False", reason="B", message="b", generation=2, now=T1
    )
    assert find_condition(same, "Ready") == {
        "type": "Ready",
        "status": "False",
        "reason": "B",
        "message": "b",
        "observedGeneration": 2,
        "lastTransitionTime": "2026-11-29T12:00:00Z",
    }
    flipped = set_condition(
        same, type="Ready", status="True", reason="C", message="c", generation=2, now=T1
    )
    assert find_condition(flipped, "Ready")["lastTransitionTime"] == "2026-11-29T12:05:00Z"  # type: ignore[index]


def test_conditions_stay_sorted_and_unique() -> None:
    conds = set_condition(
        [], type="Ready", status="True", reason="R", message="", generation=1, now=T0
    )
    conds = set_condition(
        conds, type="Degraded", status="False", reason="R", message="", generation=1, now=T0
    )
    conds = set_condition(
        conds, type="Ready", status="False", reason="R", message="", generation=1, now=T0
    )
    assert [c["type"] for c in conds] == ["Degraded", "Ready"]


def test_transitions_report_status_or_reason_changes_only() -> None:
    before = set_condition(
        [], type="Ready", status="True", reason="R", message="1/1", generation=1, now=T0
    )
    message_only = set_condition(
        before, type="Ready", status="True", reason="R", message="2/2", generation=1, now=T1
    )
    assert transitions(before, message_only) == []
    reason = set_condition(
        before, type="Ready", status="True", reason="S", message="", generation=1, now=T1
    )
    assert [c["reason"] for c in transitions(before, reason)] == ["S"]
