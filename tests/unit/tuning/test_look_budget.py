"""The operator's budget of rule 9b's looks: CPU-seconds a minute that every pass shares."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.tuning.support import T0
from vllm_operator.config import OperatorConfig
from vllm_operator.tuning.look_budget import LookBudget, look_budget_of


def test_a_look_starts_when_the_bucket_holds_what_the_last_one_cost() -> None:
    budget = LookBudget(3.0)
    assert budget.take(T0)
    budget.charge(1.0)
    assert budget.take(T0)  # 2 CPU-s left, the last look cost 1
    budget.charge(1.5)
    assert not budget.take(T0)  # 0.5 left: less than the 1.5 the last look cost
    assert not budget.take(T0 + timedelta(seconds=19))  # 0.5 + 0.95
    assert budget.take(T0 + timedelta(seconds=21))  # 3 a minute: 0.5 + 1.05
    budget.charge(2.0)  # a dearer look overdraws: -0.45
    assert not budget.take(T0 + timedelta(seconds=60))  # 1.5 left, the last cost 2
    assert budget.take(T0 + timedelta(seconds=70))


def test_a_look_dearer_than_a_minute_waits_a_minute_not_for_ever() -> None:
    budget = LookBudget(1.0)
    assert budget.take(T0)
    budget.charge(5.0)  # -4
    assert not budget.take(T0 + timedelta(minutes=4, seconds=30))
    assert budget.take(T0 + timedelta(minutes=5))  # a full minute's CPU: 1


def test_an_idle_hour_saves_no_more_than_a_minutes_cpu() -> None:
    budget = LookBudget(3.0)
    assert budget.take(T0 + timedelta(hours=1))
    budget.charge(3.0)
    assert not budget.take(T0 + timedelta(hours=1))


def test_a_clock_that_steps_back_refills_nothing() -> None:
    budget = LookBudget(3.0)
    assert budget.take(T0)
    budget.charge(3.0)
    assert not budget.take(T0 - timedelta(minutes=5))
    assert not budget.take(T0)  # the minute is counted from the latest time seen


def test_the_minute_scales_with_the_tuners_time() -> None:
    scaled = look_budget_of(OperatorConfig(tuning_look_cpu_per_minute=1, tuning_time_scale=0.05))
    assert scaled.take(T0)
    scaled.charge(1.0)
    assert not scaled.take(T0)
    assert scaled.take(T0 + timedelta(seconds=3.1))  # a minute of the tuner's is 3 s


@pytest.mark.parametrize(("cpu", "minute"), [(0, 60.0), (-1, 60.0), (3, 0.0)])
def test_a_budget_without_a_rate_is_refused(cpu: float, minute: float) -> None:
    with pytest.raises(ValueError, match="positive rate and period"):
        LookBudget(cpu, minute)


def test_the_config_refuses_no_cpu_naming_the_field() -> None:
    with pytest.raises(ValueError, match="tuning_look_cpu_per_minute"):
        OperatorConfig(tuning_look_cpu_per_minute=0)


def test_a_metered_pass_is_charged_its_cpu_only_when_it_may_look() -> None:
    budget = LookBudget(0.001)  # less than the few ms of CPU a pass below spends

    def burn() -> int:
        return sum(range(2_000_000))

    budget.metered(T0, lambda may_look: burn())  # never asked for a look: nothing charged
    assert budget.take(T0)
    budget.metered(T0, lambda may_look: (may_look(), burn()))
    assert not budget.take(T0)  # charged the pass's CPU: overdrawn


@given(
    cpu=st.floats(0.5, 30),
    passes=st.lists(st.tuples(st.floats(0, 120), st.floats(0, 5)), min_size=1, max_size=60),
)
def test_no_span_spends_more_than_its_share_a_minute_and_one_look(
    cpu: float, passes: list[tuple[float, float]]
) -> None:
    budget, at, spent = LookBudget(cpu), T0, 0.0
    for step, cost in passes:
        at += timedelta(seconds=step)
        if budget.take(at):
            budget.charge(cost)
            spent += cost
    span = (at - T0).total_seconds()
    assert spent <= cpu + cpu * span / 60 + 5 + 1e-9  # a minute's, the span's, one overdraw
