"""The capacity bench's flags, its next-window figures and its report (not its timings)."""

from __future__ import annotations

import random

import pytest
from bench.capacity_pass import _markdown, _next_window, _service, main


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--services", "0"], "--services must be at least 1, got 0"),
        (["--services", "3", "--looks", "5"], "--looks must be between 0 and --services (3)"),
        (["--looks", "-1"], "--looks must be between 0 and --services (1000), got -1"),
    ],
)
def test_bad_counts_are_refused_before_any_work(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2
    assert says in capsys.readouterr().err


def test_the_next_window_has_more_arrivals_and_new_histograms_of_the_same_mix() -> None:
    spec, snapshot = _service(0, 4, random.Random(1))
    same, later = _next_window(0, 4, (spec, snapshot), random.Random(2))
    assert same is spec
    assert snapshot.request_rate is not None and later.request_rate is not None
    assert later.request_rate == pytest.approx(snapshot.request_rate * 1.2)
    assert later.prompt_lengths != snapshot.prompt_lengths  # a new draw, as a new window's
    assert later.prompt_lengths is not None and snapshot.prompt_lengths is not None
    assert later.prompt_lengths.mean == pytest.approx(snapshot.prompt_lengths.mean, rel=0.1)


def _doc(looks: int) -> dict[str, object]:
    return {
        "command": "python -m bench.capacity_pass", "date": "d", "machine": "m", "python": "3",
        "services": 1000, "keys": 12, "estimates": 1000, "cold_evaluation_cpu_s": 2.0,
        "cold_pass_cpu_s": 17.0, "cold_pass_wall_s": 17.0, "warm_pass_cpu_s": 0.3,
        "warm_pass_wall_s": 0.3, "first_capacity_per_pod": 15.0, "first_bucket": "b",
        "looks": looks, "first_look_cpu_s": 0.75, "next_look_cpu_s": 0.88,
        "auto_pass_cpu_s": 88.3, "looks_per_pass": 100, "look_cpu_per_minute": 2.0,
        "recheck_minutes": 10.0, "budgeted_pass_cpu_s": 4.1,
        "budgeted_pass_most_cpu_s": 5.2, "budgeted_minutes": 5,
    }  # fmt: skip


def test_the_auto_rows_show_only_when_looks_were_timed() -> None:
    assert "Auto" not in _markdown(_doc(0))
    report = _markdown(_doc(40))
    assert "| its next look, a new window's figures | 0.88 s CPU per look |" in report
    assert "| one tuning loop over 1000 services in Auto without a look budget (100 of" in report
    assert (
        "(2 CPU-s a minute, tuningLookCpuPerMinute; the mean of 5 one-minute loops, the most in "
        "one; target < 5 s) | **4.1 s CPU** (most 5.2 s) |"
    ) in report
    assert "the next look's cost | every 440 minutes |" in report  # 2 / 0.88 a minute
