"""The soak's schedule is the seed's alone, and a short soak still meets different faults."""

from __future__ import annotations

import itertools

from tests.support.soak import CATALOGUE, HANG_SECONDS, schedule, summarize


def test_a_seed_replays_the_same_faults_with_the_same_draws() -> None:
    first = list(itertools.islice(schedule(18), 20))
    assert first == list(itertools.islice(schedule(18), 20))
    assert first != list(itertools.islice(schedule(19), 20))


def test_each_round_is_the_whole_catalogue_in_a_seeded_order() -> None:
    rounds = list(itertools.islice(schedule(7), 3 * len(CATALOGUE)))
    for i in range(3):
        names = [name for name, _, _ in rounds[i * len(CATALOGUE) : (i + 1) * len(CATALOGUE)]]
        assert sorted(names) == sorted(CATALOGUE)
    for _, draw, quiet in rounds:
        assert draw.seconds in HANG_SECONDS and 0 <= draw.pick < 1 and 2 <= quiet <= 8


def test_the_summary_counts_each_fault_and_its_recoveries() -> None:
    out = {"faults": [{"fault": "a", "recovery_s": 3.0}, {"fault": "a", "recovery_s": 1.5},
                      {"fault": "b", "recovery_s": 9.0}]}  # fmt: skip
    assert summarize(out) == {
        "a": {"n": 2, "min_s": 1.5, "max_s": 3.0},
        "b": {"n": 1, "min_s": 9.0, "max_s": 9.0},
    }
