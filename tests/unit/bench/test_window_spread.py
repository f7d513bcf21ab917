"""bench/window_spread.py: its summary of the runs and its flags (the runs themselves are the
twin's, covered elsewhere)."""

from __future__ import annotations

import math

import pytest
from bench.window_spread import Run, parse, summarise


def test_summary_interpolates_the_capacity_and_keeps_the_last_rate_before_a_miss() -> None:
    runs = [
        Run(1, 0.8, 1.0, 0.5),
        Run(1, 0.9, 0.99, 0.7),
        Run(1, 1.0, 0.95, 0.9),
        Run(1, 1.1, 0.99, 1.1),  # a lucky run above a miss does not count
        Run(1, 1.2, 0.5, 1.3),
    ]
    (row,) = summarise(runs)
    assert math.isclose(row["capacity"], 1.05)  # the long-run p95 reaches the SLO
    assert row["window_rate"] == 0.9
    assert math.isclose(row["spread"], (1 - 0.9 / 1.05) * math.sqrt(60 * 0.9))


def test_no_rate_meeting_the_target_gives_no_spread() -> None:
    (row,) = summarise([Run(2, 1.0, 0.9, 0.8), Run(2, 1.2, 0.8, 1.2)])
    assert row["window_rate"] is None and row["spread"] is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--pods", "1,x"], "--pods: expected comma-separated numbers"),
        (["--pods", "1.5"], "--pods: whole numbers only"),
        (["--rates", "0,1"], "--rates: every value must be a positive number"),
        (["--rates", "nan"], "--rates: every value must be a positive number"),
        (["--duration", "60"], "--duration: at least 600 s"),
        (["--jobs", "0"], "--jobs: at least 1"),
    ],
)
def test_bad_flags_are_refused_in_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        parse(argv)
