"""A budget change whose rollout cannot surge stops only pods the load does not need
(tuning/rollout_room.py): the valve step of rule 3 at the replica cap, 10 req/s over 2 pods."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.tuning.support import LONG_AGO, T0, brief, seen, snap, spec, state
from vllm_operator.tuning.decide import decide, decide_seeing_spare_gpu
from vllm_operator.tuning.model import Capacity, FleetView
from vllm_operator.tuning.settings import TuningSettings

CAPPED = spec(autoscaling={"maxReplicas": 2})
REJECTING = snap(rejection_ratio=0.05, rejection_rate=0.5)  # TTFT and KV have headroom
BUSY = Capacity(6.0, T0 - timedelta(minutes=10))  # 10/s needs ceil(10 / 5.4) = 2 pods
IDLE = Capacity(12.0, T0 - timedelta(minutes=10))  # 10/s fits on one pod at 90% of 12/s
STEP = ("SetBudget", "RaiseQueueRejections", "maxRequests", 32, 64)


def test_no_free_gpu_and_every_pod_needed_holds_the_step() -> None:
    before = state(capacity=BUSY, last_scale_at=LONG_AGO)
    decision = decide(CAPPED, REJECTING, before, T0, spare_pods=0)
    assert brief(decision) == ("Hold", "RolloutNeedsPods", None, None, None)
    assert decision.message == (
        "503 ratio 5.0% over budget 1.0% with TTFT p95 0.30s under SLO 0.50s and KV usage 40.0%, "
        "but no GPU of the type free for a surge pod, and a pod-by-pod restart would leave 1 of 2 "
        "ready pods serving 10.00/s that needs 2 at 90% of capacity 6.00/s (observed); "
        "replicas at maxReplicas 2"
    )
    assert not decision.asks_spare_gpu  # it looked: there is none
    assert decision.state.overrides == {}


def test_a_free_gpu_lifts_it_the_rollout_surges() -> None:
    before = state(capacity=BUSY, last_scale_at=LONG_AGO)
    assert brief(decide(CAPPED, REJECTING, before, T0, spare_pods=1)) == STEP


def test_not_looked_yet_asks_for_the_look_and_decides_again() -> None:
    before = state(capacity=BUSY, last_scale_at=LONG_AGO)
    first = decide(CAPPED, REJECTING, before, T0)
    assert first.reason == "RolloutNeedsPods" and first.asks_spare_gpu
    assert "no free GPU of the type known for a surge pod" in first.message
    looks: list[int] = []

    def look(spare: int | None) -> int | None:
        looks.append(1)
        return spare

    args = (CAPPED, REJECTING, before, T0, TuningSettings(), ())
    assert brief(decide_seeing_spare_gpu(*args, lambda: look(2))) == STEP
    assert decide_seeing_spare_gpu(*args, lambda: look(0)).reason == "RolloutNeedsPods"
    assert decide_seeing_spare_gpu(*args, lambda: look(None)).reason == "RolloutNeedsPods"
    assert len(looks) == 3  # once per pass that needs it


def test_a_pod_to_spare_rolls_pod_by_pod() -> None:
    before = state(capacity=IDLE, last_scale_at=LONG_AGO)
    decision = decide(CAPPED, REJECTING, before, T0, spare_pods=0)
    assert brief(decision) == STEP and not decision.asks_spare_gpu


def test_a_rising_forecast_counts_against_the_room() -> None:
    """10/s now, but the trend says more a ready time ahead: one pod at 90% of 12/s is too few."""
    rising = (*seen(6.0, T0 - timedelta(minutes=2)), *seen(8.0, T0 - timedelta(minutes=1)))
    before = state(capacity=IDLE, last_scale_at=LONG_AGO, arrivals=rising)
    decision = decide(CAPPED, REJECTING, before, T0, spare_pods=0)
    assert decision.reason == "RolloutNeedsPods", decision.message
    assert "that needs 2 at 90%" in decision.message


def test_pods_no_node_places_do_not_serve() -> None:
    """Three asked for, one Unschedulable: the restart would leave one ready pod, not two."""
    fleet = FleetView(desired=3, ready=2, updated=3, rolling=False, unschedulable=1)
    capped = spec(autoscaling={"maxReplicas": 3})
    before = state(capacity=BUSY, last_scale_at=LONG_AGO, desired_replicas=3)
    decision = decide(capped, snap(rejection_ratio=0.05, rejection_rate=0.5, fleet=fleet), before,
                      T0, spare_pods=0)  # fmt: skip
    assert decision.reason == "RolloutNeedsPods" and "leave 1 of 2 ready pods" in decision.message


def test_what_stops_no_serving_pod_is_never_held() -> None:
    before = state(capacity=BUSY, last_scale_at=LONG_AGO)
    # one replica rolls with surge 1: the new pod waits for a GPU while the old one serves
    single = spec(replicas=1, autoscaling={"maxReplicas": 1})
    one = snap(rejection_ratio=0.05, rejection_rate=0.5, pods_expected=1, pods_scraped=1,
               fleet=FleetView(desired=1, ready=1, updated=1, rolling=False))  # fmt: skip
    lone = decide(single, one, state(capacity=BUSY, last_scale_at=LONG_AGO, desired_replicas=1),
                  T0, spare_pods=0)  # fmt: skip
    assert brief(lone)[:3] == ("SetBudget", "RaiseQueueRejections", "maxRequests")
    # a canary starts one extra pod beside the others
    canary = spec(autoscaling={"maxReplicas": 2}, autotune={"canary": True})
    assert brief(decide(canary, REJECTING, before, T0, spare_pods=0)) == STEP
    # no capacity known: the tuner cannot tell, and the step goes on, judged by rule 1
    assert brief(decide(CAPPED, REJECTING, state(last_scale_at=LONG_AGO), T0, spare_pods=0)) == (
        STEP
    )


@settings(max_examples=200, deadline=None)
@given(
    rate=st.floats(0.1, 40.0),
    per_pod=st.floats(0.5, 30.0),
    ready=st.integers(1, 6),
    spare=st.sampled_from([None, 0]),
)
def test_a_budget_change_without_surge_always_leaves_the_load_its_pods(
    rate: float, per_pod: float, ready: int, spare: int | None
) -> None:
    """Whatever the load and capacity: a budget step that rolls pod by pod leaves ready - 1 pods
    that carry the rate at forecast_headroom x capacity; otherwise no budget moves."""
    replicas = max(ready, 2)
    fleet = FleetView(desired=replicas, ready=ready, updated=replicas, rolling=False,
                      unschedulable=replicas - ready)  # fmt: skip
    figures = snap(request_rate=rate, rejection_rate=0.05 * rate, rejection_ratio=0.05,
                   pods_expected=replicas, pods_scraped=ready, fleet=fleet)  # fmt: skip
    capped = spec(replicas=replicas, autoscaling={"maxReplicas": replicas})
    before = state(capacity=Capacity(per_pod, T0 - timedelta(minutes=10)),
                   last_scale_at=LONG_AGO, desired_replicas=replicas)  # fmt: skip
    decision = decide(capped, figures, before, T0, spare_pods=spare)
    if decision.action.kind == "SetBudget":
        assert (ready - 1) * TuningSettings().forecast_headroom * per_pod >= rate - 1e-9
    else:
        assert decision.state.overrides == {}


def test_a_scale_up_in_its_place_still_asks_whether_the_valve_could_move_on_a_surge() -> None:
    """Below the replica cap the blocked valve step falls back to a replica; a free GPU would
    let the better remedy of the rule act, so the pass asks for the look all the same."""
    roomy = spec(autoscaling={"maxReplicas": 4})
    before = state(capacity=BUSY, last_scale_at=LONG_AGO)
    first = decide(roomy, REJECTING, before, T0)
    assert brief(first)[:2] == ("ScaleReplicas", "ScaleUpRejections") and first.asks_spare_gpu
    args = (roomy, REJECTING, before, T0, TuningSettings(), ())
    assert brief(decide_seeing_spare_gpu(*args, lambda: 1)) == STEP
    assert decide_seeing_spare_gpu(*args, lambda: 0) == first
