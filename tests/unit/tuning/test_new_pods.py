"""Rule 7's blocker NewPodsSuffice (scaling.new_pods_suffice): a latency miss in a metrics window
older than the pods of the last scale-up adds no pod when the capacity says the fleet now serves
the forecast; a miss after a scale down, a window of one fleet size, or a load beyond the fleet
still scales up."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from tests.unit.tuning.support import T0, brief, history, snap, spec, state
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.model import Capacity, FleetView, MetricsSnapshot, TuningState

CAPACITY = Capacity(8.0, T0 - timedelta(minutes=30))  # 8 req/s per pod: 6.4 at 80%
# the base spec: TTFT SLO 500 ms, maxReplicas 4; a window of 120 s, the default ready time 300 s:
# a window began after the pods of a change were Ready 420 s after it
JUST_SCALED = timedelta(seconds=200)


def three_pods(rate: float = 10.0) -> MetricsSnapshot:
    """Three pods Ready and scraped, TTFT p95 over its SLO (rule 7), the rest quiet."""
    fleet = FleetView(desired=3, ready=3, updated=3, rolling=False)
    return snap(request_rate=rate, ttft_p95=0.6, pods_expected=3, pods_scraped=3, fleet=fleet)


def scaled(came_from: int, ago: timedelta = JUST_SCALED, rate: float = 10.0) -> TuningState:
    return state(
        desired_replicas=3,
        last_scale_at=T0 - ago,
        last_scale_from=came_from,
        capacity=CAPACITY,
        arrivals=history(rate, rate, rate, rate),
    )


def test_a_miss_older_than_the_pods_just_added_holds_when_they_serve_the_forecast() -> None:
    decision = decide(spec(), three_pods(), scaled(came_from=2), T0)
    assert brief(decision) == ("Hold", "NewPodsSuffice", None, None, None)
    assert decision.message == (
        "TTFT p95 0.60s over SLO 0.50s with 2.7 running and 0.0 waiting per pod (active cap 8)"
        ", but the window began before the pods of replicas 2 -> 3 (200s ago) were Ready, and 3"
        " serve 10.00/s (the forecast) under 80% of capacity 8.00/s (observed) each"
    )
    assert decision.state.last_scale_from == 2  # a hold keeps what the last change was


@pytest.mark.parametrize(
    ("why", "came_from", "ago", "rate"),
    [
        ("after a scale down the miss is the smaller fleet's", 4, JUST_SCALED, 10.0),
        ("the window began after the new pods were Ready", 2, timedelta(seconds=420), 10.0),
        ("the forecast needs a fourth pod: 25/s at 6.4 per pod", 2, JUST_SCALED, 25.0),
        (
            "three fit rule 8's 90% (7.2 per pod), not a scale down's 80% (6.4)",
            2,
            JUST_SCALED,
            20.0,
        ),
    ],
)
def test_a_miss_scales_up_otherwise(why: str, came_from: int, ago: timedelta, rate: float) -> None:
    decision = decide(spec(), three_pods(rate), scaled(came_from, ago, rate), T0)
    assert brief(decision) == ("ScaleReplicas", "ScaleUpLatency", "replicas", 3, 4), why
    assert decision.state.last_scale_from == 3  # the move remembers where it came from


def test_without_a_capacity_or_a_known_last_change_a_miss_scales_up() -> None:
    unknown = replace(scaled(came_from=2), capacity=None)
    assert brief(decide(spec(), three_pods(), unknown, T0))[1] == "ScaleUpLatency"
    # a status written before lastScaleFrom existed: direction unknown, the miss is trusted
    older = replace(scaled(came_from=2), last_scale_from=None)
    assert brief(decide(spec(), three_pods(), older, T0))[1] == "ScaleUpLatency"
