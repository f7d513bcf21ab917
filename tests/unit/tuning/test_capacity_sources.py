"""Which capacity the rules trust (tuning/capacity.py), and what the model's lets them do: scale
up before the first miss, and scale down where the fleet never missed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.unit.tuning.support import LONG_AGO, T0, brief, snap, spec, state
from tests.unit.tuning.test_forecast import RISING
from vllm_operator.tuning.capacity import trusted_capacity
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.inputs import Inputs
from vllm_operator.tuning.model import Capacity, CapacityEstimate, RateSample
from vllm_operator.tuning.persist import status_from_state
from vllm_operator.tuning.settings import TuningSettings

SETTINGS = TuningSettings()
LEARNED = T0 - timedelta(minutes=10)


def model(per_pod: float) -> CapacityEstimate:
    return CapacityEstimate(per_pod, "model", T0, "prompts ~500 tokens, outputs ~100 tokens")


@pytest.mark.parametrize(
    ("observed", "modelled", "expected"),
    [
        (None, None, None),
        (None, 8.0, (8.0, "model")),  # before any miss: the model
        (6.0, None, (6.0, "observed")),  # no estimate (no histograms): what was seen
        (6.0, 8.0, (6.0, "observed")),  # a miss below the model caps it
        (9.0, 8.0, (8.0, "model")),  # observed above, within 1.5x: the model, the lower
        (12.5, 8.0, (12.5, "observed")),  # far above: the pods disproved the model
        (6.0, 0.0, (6.0, "observed")),  # a model that finds nothing within the SLO is no figure
    ],
)
def test_trusted_capacity(
    observed: float | None, modelled: float | None, expected: tuple[float, str] | None
) -> None:
    known = None if observed is None else Capacity(observed, LEARNED)
    given = () if modelled is None else (model(modelled),)
    i = Inputs(spec(), snap(), state(capacity=known), T0, SETTINGS, False, given)
    found = trusted_capacity(i)
    assert (None if found is None else (found.per_pod, found.source)) == expected


def test_a_rising_load_scales_up_on_the_model_before_any_miss() -> None:
    decision = decide(spec(), snap(), state(arrivals=RISING), T0, capacities=(model(8.0),))
    # 15 req/s (the 1.5x cap) at 7.2 per pod (90% of 8): 3 replicas, no miss needed
    assert brief(decision) == ("ScaleReplicas", "ScaleUpForecast", "replicas", 2, 3)
    assert "capacity 8.00/s, model" in decision.message
    assert (decision.capacity_source, decision.model_capacity) == ("model", model(8.0))
    # without the model, nothing is known yet: the rising load waits for a miss
    blind = decide(spec(), snap(), state(arrivals=RISING), T0)
    assert brief(blind)[1] == "WithinSLO" and blind.capacity_source is None


# Quiet: 1 running per pod of a cap of 8, TTFT at 40% and ITL at 16% of their SLOs, 4 req/s.
QUIET = {"running": 4.0, "waiting": 0.0, "ttft_p95": 0.2, "itl_p95": 0.008, "kv_usage": 0.1,
         "request_rate": 4.0, "pods_scraped": 4}  # fmt: skip
WIDE = spec(autoscaling={"maxReplicas": 8})


def _quiet_fleet(**changes: object) -> object:
    return state(desired_replicas=4, last_scale_at=LONG_AGO, scale_down_votes=2, **changes)


def test_a_fleet_that_never_missed_scales_down_to_what_the_model_says_it_needs() -> None:
    decision = decide(WIDE, snap(**QUIET), _quiet_fleet(), T0, capacities=(model(8.0),))
    # 4 req/s at 80% of 8 per pod needs 1 pod; one step (25%) would have been 4 -> 3
    assert brief(decision) == ("ScaleReplicas", "ScaleDownLowLoad", "replicas", 4, 1)
    assert decision.capacity_source == "model"


def test_a_capacity_sized_move_that_fails_a_check_falls_back_to_one_step() -> None:
    busy = {**QUIET, "kv_usage": 0.25}  # on 1 pod KV would be 1.0, on 3 it is 0.33
    decision = decide(WIDE, snap(**busy), _quiet_fleet(), T0, capacities=(model(8.0),))
    assert brief(decision) == ("ScaleReplicas", "ScaleDownLowLoad", "replicas", 4, 3)


@pytest.mark.parametrize(
    ("earlier", "expected"),
    [
        # 4 req/s at 80% of 4 per pod needs 2 pods: two of the three passes of the last 3
        # minutes had the lower figure, which sizes the scale-down
        (((60, 4.0), (30, 4.0)), 2),
        # one pass in the lower bucket among higher ones is noise: 80% of 8 needs 1 pod
        (((90, 8.0), (60, 4.0), (30, 8.0)), 1),
        # older than forecast_window (3 minutes): only the present figure counts
        (((240, 4.0), (210, 4.0)), 1),
    ],
)
def test_a_scale_down_fits_the_typical_model_capacity_of_the_last_passes(
    earlier: tuple[tuple[int, float], ...], expected: int
) -> None:
    # the model's figure moves by a bucket step when the lengths cross a bucket edge; sized by
    # the higher one, the next pass back in the lower bucket would add the pod again
    arrivals = tuple(RateSample(T0 - timedelta(seconds=a), 4.0, c) for a, c in earlier)
    fleet = _quiet_fleet(arrivals=arrivals)
    decision = decide(WIDE, snap(**QUIET), fleet, T0, capacities=(model(8.0),))
    assert brief(decision) == ("ScaleReplicas", "ScaleDownLowLoad", "replicas", 4, expected)
    # what the rules scale up on is the present figure
    assert decision.model_capacity == model(8.0)


def test_without_a_capacity_the_scale_down_is_one_step() -> None:
    decision = decide(WIDE, snap(**QUIET), _quiet_fleet(), T0)
    assert brief(decision) == ("ScaleReplicas", "ScaleDownLowLoad", "replicas", 4, 3)


def test_status_shows_both_capacities_and_the_source() -> None:
    decision = decide(
        spec(), snap(), state(capacity=Capacity(6.0, LEARNED)), T0, capacities=(model(8.0),)
    )
    status = status_from_state(decision.state, decision, None, T0, mode="Auto")
    assert status.capacity is not None and status.capacity.per_pod == 6.0
    assert status.capacity_source == "observed"
    shown = status.model_capacity
    assert shown is not None
    assert (shown.per_pod, shown.workload, shown.computed_at) == (
        8.0, "prompts ~500 tokens, outputs ~100 tokens", T0
    )  # fmt: skip
