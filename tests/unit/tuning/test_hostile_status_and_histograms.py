"""A tuning pass survives what status.tuning and the token histograms may hold but no engine or
operator writes: it reads them as unknown, never raises (found by fuzzing, 2026-12-05).

The API accepts a capacity of 0 or 1e-300 (`minimum: 0`), a ready time of 1e12 s (no maximum)
and a time without a zone (`format: date-time`); an exporter or a relabelling can give a
histogram a bound that is not a number, or below one token. Each used to raise in the pass
(ZeroDivisionError, OverflowError, TypeError, ValueError), so status.tuning went stale while
passes.py retried.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.metrics.fake import load
from tests.unit.metrics.test_snapshot import snapshot as snapshot_of
from tests.unit.tuning.support import T0, snap, spec, state
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.sim.catalog import load_catalog
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.forecast import READY_TIME_MAX
from vllm_operator.tuning.model import MetricsSnapshot, PastPeriod, RateSample
from vllm_operator.tuning.model_capacity import CapacityCache, Unmeasured, model_capacity
from vllm_operator.tuning.persist import state_from_status
from vllm_operator.tuning.plan import build_tune_plan
from vllm_operator.tuning.settings import TuningSettings

SETTINGS = TuningSettings()
TRAFFIC = load("traffic-two-pods.json")
QUIET = snap(request_rate=0.5, running=0.5, kv_usage=0.05, ttft_p95=0.05, itl_p95=0.01)


def service(tuning: dict[str, Any]) -> VLLMService:
    body = {
        "apiVersion": "serving.vllmop.io/v1alpha1",
        "kind": "VLLMService",
        "metadata": {"name": "chat", "namespace": "team-a", "generation": 1},
        "spec": spec().model_dump(by_alias=True, exclude_none=True, mode="json"),
        "status": {"tuning": tuning},
    }
    return VLLMService.model_validate(body)


def full_pass(svc: VLLMService, snapshot: MetricsSnapshot) -> None:
    """What handlers/tune.py does with a service: state from status, decide, the plan."""
    assert svc.status is not None
    restored = state_from_status(svc.status.tuning, svc.spec, SETTINGS)
    decision = decide(svc.spec, snapshot, restored, T0, SETTINGS)
    plan = build_tune_plan(svc, decision, snapshot, T0, SETTINGS, window="2m", conditions=[])
    text = f"{decision.message} {[e.message for e in plan.events]}"
    assert "nan" not in text.lower().split() and " inf" not in text


def restored(tuning: dict[str, Any]) -> Any:
    svc = service(tuning)
    assert svc.status is not None
    return state_from_status(svc.status.tuning, svc.spec, SETTINGS)


@pytest.mark.parametrize("per_pod", [0.0, 1e-300, 1e300])
def test_a_capacity_no_pod_has_is_forgotten(per_pod: float) -> None:
    tuning = {"capacity": {"perPod": per_pod, "learnedAt": T0.isoformat()}}
    assert restored(tuning).capacity is None
    full_pass(service(tuning), QUIET)


def test_a_ready_time_past_the_longest_believable_is_capped() -> None:
    window = [
        {"time": (T0 - timedelta(seconds=30 * k)).isoformat(), "figures": {"request_rate": 10.0}}
        for k in range(1, 8)
    ]
    tuning = {"readyTime": {"seconds": 1e12, "learnedAt": T0.isoformat()}, "window": window}
    ready = restored(tuning).ready_time
    assert ready is not None and ready.seconds == READY_TIME_MAX
    day = 86400.0
    rates = tuple(RateSample(T0 - timedelta(seconds=day + 600 - 60 * k), 10.0) for k in range(30))
    full_pass(service(tuning), snap(past_period=PastPeriod(day, rates)))


def test_times_without_a_zone_are_read_as_utc() -> None:
    tuning = {
        "restartTimes": ["2026-11-29T11:00:00"],
        "capacity": {"perPod": 5.0, "learnedAt": "2026-11-29T11:59:00"},
    }
    state_ = restored(tuning)
    assert state_.restart_times[0] == T0 - timedelta(hours=1)
    assert state_.capacity is not None and state_.capacity.at == T0 - timedelta(minutes=1)
    full_pass(service(tuning), QUIET)


def series(histogram: str, le: str | None, value: float) -> dict[str, Any]:
    labels = {"histogram": histogram} if le is None else {"histogram": histogram, "le": le}
    return {"metric": labels, "value": [TRAFFIC.time, str(value)]}


def test_a_bucket_bound_that_is_not_a_number_is_left_out() -> None:
    result = [series("prompt", "abc", 1), series("prompt", "", 1), series("prompt", "NaN", 1)]
    result += [series("prompt", "100", 4), series("prompt", "+Inf", 4)]
    lengths = snapshot_of(TRAFFIC.with_result("lengths", result)).prompt_lengths
    assert lengths is not None and lengths.edges == (100.0,)


@pytest.mark.parametrize(
    "output",
    [
        [series("output", "-1", 0), series("output", "1", 1)],  # a mean of no tokens
        [series("output", "1e308", 1), series("output", None, 3)],  # a bound past any context
    ],
)
def test_a_length_histogram_no_request_can_have_is_no_workload(output: list[Any]) -> None:
    result = [series("prompt", "10", 1), *output]
    snapshot = snapshot_of(TRAFFIC.with_result("lengths", result))
    found = model_capacity(
        spec(model="Qwen2.5-7B"), snapshot, state(), SETTINGS,
        catalog=load_catalog(), cache=CapacityCache(),
    )  # fmt: skip
    assert isinstance(found, Unmeasured) and "output token histogram" in found.reason


FINITE = st.floats(min_value=0, max_value=1e308, allow_nan=False, allow_infinity=False)
NAIVE_OR_UTC = st.sampled_from(["2026-11-29T11:00:00", "2026-11-29T11:00:00Z", T0.isoformat()])


@settings(max_examples=150, deadline=None)
@given(per_pod=FINITE, seconds=FINITE, when=NAIVE_OR_UTC, rate=FINITE)
def test_any_capacity_and_ready_time_the_api_accepts_make_a_pass(
    per_pod: float, seconds: float, when: str, rate: float
) -> None:
    window = [{"time": when, "figures": {"request_rate": min(rate, 1e6)}}]
    tuning = {
        "capacity": {"perPod": per_pod, "learnedAt": when},
        "readyTime": {"seconds": seconds, "learnedAt": when},
        "restartTimes": [when],
        "window": window,
    }
    full_pass(service(tuning), QUIET)
    ready = restored(tuning).ready_time
    assert ready is None or (math.isfinite(ready.seconds) and ready.seconds <= READY_TIME_MAX)
