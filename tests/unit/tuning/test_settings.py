"""TuningSettings: inconsistent constants are refused; time compresses for end-to-end runs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from vllm_operator.tuning.settings import TuningSettings


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"well_under": 0.8}, "need 0 < well_under < headroom <= 1"),
        ({"headroom": 1.1}, "need 0 < well_under < headroom <= 1"),
        ({"max_budget_step": 1.0}, "need max_budget_step > 1 and default_bound_factor >= 1"),
        ({"scale_down_votes": 0}, "need scale_down_votes >= 1 and 0 < scale_down_fraction < 1"),
        (
            {"scale_down_fraction": 1.0},
            "need scale_down_votes >= 1 and 0 < scale_down_fraction < 1",
        ),
        ({"rollback_margin": -0.1}, "need scale_up_fraction > 0 and rollback_margin >= 0"),
        (
            {"fewer_pods_min_gain": 0.9},
            "need judgement_load_tolerance >= 0 and fewer_pods_min_gain >= 1",
        ),
        ({"floor_min_gain": 0.99}, "need floor_min_gain >= 1"),
    ],
)
def test_inconsistent_settings_are_refused(changes: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        TuningSettings(**changes)


def test_time_scaled_compresses_durations_only() -> None:
    fast = TuningSettings().time_scaled(0.1)
    assert fast == TuningSettings(
        scale_up_cooldown=timedelta(seconds=6),
        scale_down_stabilization=timedelta(seconds=30),
        capacity_memory=timedelta(seconds=360),
        pod_ready_allowance=timedelta(seconds=42),
        default_ready_time=timedelta(seconds=30),
        forecast_window=timedelta(seconds=18),
        under_window=timedelta(seconds=60),
        retune_cooldown=timedelta(seconds=90),
        rollback_evaluation_delay=timedelta(seconds=18),
        hold_after_rollback=timedelta(seconds=180),
        retune_payback=timedelta(seconds=180),
        retune_problem_age=timedelta(seconds=6),
        fewer_pods_recheck=timedelta(seconds=60),
        fewer_pods_payback=timedelta(seconds=720),
        canary_deadline=timedelta(seconds=120),
        restart_window=timedelta(seconds=360),
        staleness_limit=timedelta(seconds=18),
    )
