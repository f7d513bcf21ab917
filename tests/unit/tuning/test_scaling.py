"""Replica steps, low-load votes, stabilisation: the fast lever and its hysteresis."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.unit.tuning.support import LONG_AGO, T0, brief, seen, snap, spec, state
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.model import Action, Capacity, Decision, Forecast

SCALING_8 = {"autoscaling": {"minReplicas": 2, "maxReplicas": 8}}


@pytest.mark.parametrize(
    ("replicas", "to"), [(2, 3), (3, 4), (4, 6), (6, 8), (7, 8)]
)  # +max(1, floor(50%)), capped at maxReplicas
def test_scale_up_step(replicas: int, to: int) -> None:
    decision = decide(spec(**SCALING_8), snap(ttft_p95=0.6), state(desired_replicas=replicas), T0)
    assert brief(decision) == ("ScaleReplicas", "ScaleUpLatency", "replicas", replicas, to)


def test_scale_up_from_one() -> None:
    decision = decide(spec(), snap(ttft_p95=0.6), state(desired_replicas=1), T0)
    assert brief(decision)[3:] == (1, 2)


def test_scale_up_decision_in_full() -> None:
    snapshot = snap(ttft_p95=0.6)
    decision = decide(spec(), snapshot, state(scale_down_votes=0), T0)
    assert decision == Decision(
        action=Action("ScaleReplicas", "replicas", 2, 3),
        reason="ScaleUpLatency",
        message=(
            "TTFT p95 0.60s over SLO 0.50s with 4.0 running and 0.0 waiting per pod "
            "(active cap 8): replicas 2 -> 3"
        ),
        figures=snapshot.figures(),
        # 10 req/s over 2 pods missed the SLO: a pod serves less than 5 req/s
        state=state(
            desired_replicas=3,
            last_scale_at=T0,
            last_scale_from=2,
            capacity=Capacity(5.0, T0),
            arrivals=seen(),
            problem_since=T0,
        ),
        # one pass: no trend yet, so the forecast is the present, over the default ready time
        forecast=Forecast(10.0, 10.0, 0.0, 300.0, "default", 1),
        capacity_source="observed",  # the capacity this miss taught
    )


# Idle enough that one replica fewer still leaves everything well under: 2 -> 1 replica means
# at most 4.8 in flight per pod (60% of the cap 8), KV 0.4 x 2 = 0.8, and ITL 20ms x 2 = 40ms
# (80% of the SLO 50ms, taking ITL as proportional to the decode batch).
LOW = {"running": 4.8, "waiting": 0.0, "ttft_p95": 0.3, "itl_p95": 0.02, "kv_usage": 0.4}
DOWN = ("ScaleReplicas", "ScaleDownLowLoad", "replicas", 2, 1)
VOTING = ("Hold", "ScaleDownVoting", None, None, None)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, DOWN),
        ({"running": 4.9}, ("Hold", "WithinSLO", None, None, None)),
        ({"running": 2.8, "waiting": 2.0}, ("Hold", "WithinSLO", None, None, None)),  # 1 waits/pod
        ({"ttft_p95": 0.301}, ("Hold", "WithinSLO", None, None, None)),
        ({"itl_p95": 0.0201}, ("Hold", "WithinSLO", None, None, None)),  # over 40ms after
        ({"rejection_ratio": 0.006, "rejection_rate": 0.06}, DOWN),
        (
            {"rejection_ratio": 0.0061, "rejection_rate": 0.06},
            ("Hold", "WithinSLO", None, None, None),
        ),
        ({"kv_usage": 0.41}, ("Hold", "WithinSLO", None, None, None)),
        ({"preemption_rate": 0.01}, ("Hold", "WithinSLO", None, None, None)),
        ({"running": None}, ("Hold", "WithinSLO", None, None, None)),  # unmeasured is not low
        # An absent KV series is no headroom (as for rule 3), even on an idle service.
        ({"kv_usage": None}, ("Hold", "WithinSLO", None, None, None)),
        (
            {"kv_usage": None, "request_rate": 0.0, "ttft_p95": None, "itl_p95": None},
            ("Hold", "WithinSLO", None, None, None),
        ),
        # An unmeasured arrival rate (a fresh pod's counters before two scrapes) is not low
        # either: quiet gauges cannot tell a lull from load not yet reported.
        ({"request_rate": None}, ("Hold", "WithinSLO", None, None, None)),
        (
            {"request_rate": None, "ttft_p95": None, "itl_p95": None, "running": 0.0},
            ("Hold", "WithinSLO", None, None, None),
        ),
        # Idle: too few requests for percentiles; the gauges alone say low.
        ({"request_rate": 0.0, "ttft_p95": None, "itl_p95": None, "running": 0.0}, DOWN),
    ],
)
def test_low_load_thresholds(changes: dict[str, Any], expected: tuple[Any, ...]) -> None:
    decision = decide(spec(), snap(**{**LOW, **changes}), state(scale_down_votes=2), T0)
    assert brief(decision) == expected


@pytest.mark.parametrize(
    ("itl", "expected"),
    [
        (0.03, ("ScaleReplicas", "ScaleDownLowLoad", "replicas", 8, 6)),  # 30ms x 8/6 = 40ms
        (0.031, ("Hold", "WithinSLO", None, None, None)),  # no longer quiet (60% of 50ms)
        (None, ("ScaleReplicas", "ScaleDownLowLoad", "replicas", 8, 6)),  # unmeasured: no limit
    ],
)
def test_itl_after_the_step(itl: float | None, expected: tuple[Any, ...]) -> None:
    load = {**LOW, "running": 0.0, "kv_usage": 0.1, "itl_p95": itl}
    before = state(desired_replicas=8, scale_down_votes=2)
    assert brief(decide(spec(**SCALING_8), snap(**load), before, T0)) == expected


@pytest.mark.parametrize(
    ("votes", "last_scale", "expected", "votes_after"),
    [
        (0, LONG_AGO, VOTING, 1),
        (1, LONG_AGO, VOTING, 2),
        (2, LONG_AGO, DOWN, 0),
        (2, T0 - timedelta(seconds=299), ("Hold", "ScaleDownStabilizing", None, None, None), 3),
        (2, T0 - timedelta(seconds=300), DOWN, 0),
        (5, None, DOWN, 0),
    ],
)
def test_votes_and_stabilisation(
    votes: int, last_scale: Any, expected: tuple[Any, ...], votes_after: int
) -> None:
    before = state(scale_down_votes=votes, last_scale_at=last_scale)
    decision = decide(spec(), snap(**LOW), before, T0)
    assert (brief(decision), decision.state.scale_down_votes) == (expected, votes_after)


def test_a_busy_pass_resets_the_votes() -> None:
    decision = decide(spec(), snap(), state(scale_down_votes=2), T0)
    assert (decision.reason, decision.state.scale_down_votes) == ("WithinSLO", 0)


@pytest.mark.parametrize(("replicas", "to"), [(8, 6), (4, 3), (3, 2)])  # -max(1, floor(25%))
def test_scale_down_step(replicas: int, to: int) -> None:
    load = {**LOW, "running": 0.0, "kv_usage": 0.1}
    decision = decide(
        spec(**SCALING_8), snap(**load), state(desired_replicas=replicas, scale_down_votes=2), T0
    )
    assert brief(decision)[3:] == (replicas, to)


def test_at_min_replicas_low_load_is_within_slo() -> None:
    decision = decide(spec(**SCALING_8), snap(**LOW), state(scale_down_votes=2), T0)
    assert (decision.reason, decision.state.scale_down_votes) == ("WithinSLO", 3)


def test_without_autoscaling_replicas_are_never_touched() -> None:
    decision = decide(spec(autoscaling=None), snap(**LOW), state(scale_down_votes=2), T0)
    assert (brief(decision), decision.state.desired_replicas) == (
        ("Hold", "WithinSLO", None, None, None),
        None,
    )


def test_first_pass_takes_spec_replicas_as_the_count() -> None:
    decision = decide(spec(replicas=3), snap(ttft_p95=0.6), state(desired_replicas=None), T0)
    assert brief(decision)[3:] == (3, 4)
