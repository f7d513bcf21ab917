"""A replay's verdict without the whole replay: stopped at a certain miss, or answered from a
replay its budgets make the same (planning/evaluate.py evaluate_unless_missed, sim/engine/
reach.py). Both must give exactly what the whole replay gives; these compare them."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from vllm_operator.planning.candidate import (
    Candidate,
    Target,
    build_service,
    check_service,
    resolve,
)
from vllm_operator.planning.evaluate import Point, Setting, evaluate, evaluate_unless_missed
from vllm_operator.planning.workload import Workload, build_arrivals
from vllm_operator.sim import runner
from vllm_operator.sim.catalog import Catalog, load_catalog
from vllm_operator.sim.engine import ResolvedConfig
from vllm_operator.sim.engine.reach import Reach
from vllm_operator.sim.fleet import Fleet
from vllm_operator.sim.workload import LengthDist

LABEL = "verdict"
MIX = LengthDist("lognormal", 900, 1.0, cap=6000), LengthDist("lognormal", 120, 1.0, cap=1000)


@functools.cache
def catalog() -> Catalog:
    return load_catalog()


def load(rate: float, horizon: float = 20.0) -> Workload:
    return Workload("poisson", "verdicts", rate=rate, prompt=MIX[0], output=MIX[1],
                    horizon=horizon)  # fmt: skip


def setting(target: Target) -> Setting:
    return Setting(catalog(), "Qwen2.5-3B", target, {})


def runs(c: Candidate) -> ResolvedConfig | None:
    """What vLLM runs for `c`; None when the API model, the renderer or vLLM refuses it."""
    target = Target(1.0, 0.1, margin=0.0)
    if check_service(build_service(c, model="plan", name="plan", namespace=None, target=target)):
        return None
    try:
        return resolve(c, catalog(), "Qwen2.5-3B")
    except ValueError:
        return None


def figures(p: Point) -> Point:
    """A point's figures without what names its candidate."""
    return replace(p, candidate=Candidate("T4", 1), flags={}, gpu_hours_per_hour=0.0)


budgets = st.fixed_dictionaries(
    {
        "max_num_seqs": st.sampled_from([16, 32, 64, 128]),
        "max_num_active_seqs": st.one_of(st.none(), st.sampled_from([2, 4, 8, 16, 32])),
        "max_num_batched_tokens": st.sampled_from([512, 1024, 2048, 4096, 8192, 16384]),
        "max_num_queued_reqs": st.one_of(st.none(), st.sampled_from([2, 4, 8, 16, 64, 256])),
        "max_num_queued_tokens": st.one_of(st.none(), st.sampled_from([2048, 8192, 32768, 131072])),
    }
)
MOVED = ("max_num_active_seqs", "max_num_batched_tokens", "max_num_queued_reqs",
         "max_num_queued_tokens")  # fmt: skip
targets = st.sampled_from(
    [Target(1.0, 0.1, 0.01, margin=0.0), Target(0.4, 0.06, 0.0, margin=0.0), Target(3.0, None)]
)


def candidate(values: Mapping[str, int | None]) -> Candidate:
    return Candidate("T4", 1).with_budgets(**values)


@settings(derandomize=True, max_examples=40, deadline=None)
@given(budgets, st.sampled_from([1.0, 3.0, 6.0, 12.0]), targets)
def test_a_replay_stopped_at_a_certain_miss_is_a_miss(
    values: dict[str, int | None], rate: float, target: Target
) -> None:
    c = candidate(values)
    assume(runs(c) is not None)
    w, s = load(rate), setting(target)
    arrivals = build_arrivals(w)
    whole = evaluate(c, w, arrivals, s, LABEL)
    stopped, _ = evaluate_unless_missed(c, w, arrivals, s, LABEL)
    if stopped is None:
        assert not whole.meets_slo
    else:
        assert stopped == whole


@pytest.mark.parametrize("figure", ["ttft", "itl", "rejected"])
def test_a_replay_whose_figure_ends_at_its_limit_runs_to_the_end(figure: str) -> None:
    """A limit at the whole replay's own p95 (or 503 share) is met, with about 5% of the values
    over it on the way: a watch that stopped short of the count that makes a miss certain would
    call it a miss."""
    # a valve for the 503s; for the p95s none, so that every request counted finishes and the
    # most the watch allows for is what the replay has
    valve = {"max_num_queued_reqs": 24} if figure == "rejected" else {}
    c = candidate({"max_num_seqs": 16, **valve})
    w = load(6.0)
    arrivals = build_arrivals(w)
    loose = evaluate(c, w, arrivals, setting(Target(600.0, 600.0, 1.0, margin=0.0)), LABEL)
    assert (loose.rejected_share > 0) is (figure == "rejected")
    edge = {
        "ttft": Target(loose.ttft_p95_s, None, 1.0, margin=0.0),
        "itl": Target(600.0, loose.itl_p95_s, 1.0, margin=0.0),
        "rejected": Target(600.0, None, loose.rejected_share, margin=0.0),
    }[figure]
    whole = evaluate(c, w, arrivals, setting(edge), LABEL)
    assert whole.meets_slo
    assert evaluate_unless_missed(c, w, arrivals, setting(edge), LABEL)[0] == whole


def edges(field: str, reach: Reach, ran: ResolvedConfig) -> set[int | None]:
    """Values of `field` at and around the edges of what the replay's comparisons saw."""
    if field == "max_num_queued_reqs":
        low, high = reach.requests_admitted, reach.requests_refused
    elif field == "max_num_queued_tokens":
        low, high = reach.tokens_admitted + 1, reach.tokens_refused
    elif field == "max_num_active_seqs":
        low, high = reach.running_admitted + 1, reach.running_stopped
    else:
        low, high = reach.budget_used, ran.max_num_batched_tokens
    around = {low - 1, low, low + 1, 2 * low, None}
    if high is not None:
        around |= {high - 1, high, high + 1, 2 * high}
    return {v for v in around if v is None or v > 0}


def same_replays_checked(values: Mapping[str, int | None], rate: float, target: Target) -> int:
    """Replays the same as the base's by its reach, checked equal to it; how many."""
    base = candidate(values)
    ran = runs(base)
    if ran is None:
        return 0
    w, s = load(rate), setting(target)
    arrivals = build_arrivals(w)
    point, reach = evaluate_unless_missed(base, w, arrivals, s, LABEL)
    checked = 0
    for field in MOVED:
        for value in edges(field, reach, ran):
            other = candidate({**values, field: value})
            would = runs(other)
            if would is None or other == base or not reach.same_run(ran, would):
                continue
            again, _ = evaluate_unless_missed(other, w, arrivals, s, LABEL)
            if point is None:
                assert again is None, (field, value)
            else:
                assert again is not None and figures(again) == figures(point), (field, value)
                assert figures(evaluate(other, w, arrivals, s, LABEL)) == figures(point)
            checked += 1
    return checked


@settings(derandomize=True, max_examples=40, deadline=None)
@given(budgets, st.sampled_from([1.0, 4.0, 10.0]), targets)
def test_budgets_the_reach_calls_the_same_replay_the_same(
    values: dict[str, int | None], rate: float, target: Target
) -> None:
    same_replays_checked(values, rate, target)


def test_the_same_replays_checked_are_many_and_of_every_budget() -> None:
    """The property above holds for more than the budgets that never came near a limit."""
    checked = [
        same_replays_checked(values, rate, Target(1.0, 0.1, 0.01, margin=0.0))
        for values, rate in (
            ({"max_num_seqs": 64, "max_num_queued_reqs": 16, "max_num_active_seqs": 8}, 6.0),
            ({"max_num_seqs": 32, "max_num_batched_tokens": 16384}, 1.0),
            ({"max_num_seqs": 16, "max_num_queued_tokens": 8192}, 10.0),
        )
    ]
    assert all(n >= 3 for n in checked), checked


def _reach(c: Candidate, rate: float) -> tuple[ResolvedConfig, Reach]:
    ran = runs(c)
    assert ran is not None
    w = load(rate)
    _, reach = evaluate_unless_missed(c, w, build_arrivals(w), setting(Target(30.0)), LABEL)
    return ran, reach


def test_a_valve_the_queue_never_filled_is_the_same_at_any_width_above_what_it_held() -> None:
    base = candidate({"max_num_seqs": 64, "max_num_queued_reqs": 256})
    ran, reach = _reach(base, 2.0)
    assert reach.requests_refused is None and 0 < reach.requests_admitted < 64
    for valve in (reach.requests_admitted, 1024, None):
        other = runs(candidate({"max_num_seqs": 64, "max_num_queued_reqs": valve}))
        assert other is not None and reach.same_run(ran, other)
    narrower = runs(
        candidate({"max_num_seqs": 64, "max_num_queued_reqs": reach.requests_admitted - 1})
    )
    assert narrower is not None and not reach.same_run(ran, narrower)


def test_a_valve_that_refused_is_the_same_only_between_what_it_let_in_and_refused() -> None:
    base = candidate({"max_num_seqs": 8, "max_num_queued_reqs": 8})
    ran, reach = _reach(base, 12.0)
    assert reach.requests_refused == 9
    for valve, same in ((8, True), (9, False), (16, False), (None, False)):
        other = runs(candidate({"max_num_seqs": 8, "max_num_queued_reqs": valve}))
        assert other is not None and reach.same_run(ran, other) is same


def test_a_token_budget_that_held_a_step_back_is_the_same_only_at_its_value() -> None:
    base = candidate({"max_num_seqs": 64, "max_num_batched_tokens": 512})
    ran, reach = _reach(base, 6.0)
    assert reach.budget_bound
    for budget in (1024, 16384):
        other = runs(candidate({"max_num_seqs": 64, "max_num_batched_tokens": budget}))
        assert other is not None and not reach.same_run(ran, other)


def test_a_token_budget_no_step_reached_is_the_same_down_to_what_the_steps_used() -> None:
    base = candidate({"max_num_seqs": 64, "max_num_batched_tokens": 65536})
    ran, reach = _reach(base, 0.5)
    assert not reach.budget_bound and reach.budget_used < 16384
    for budget, same in ((16384, True), (reach.budget_used, True), (reach.budget_used - 1, False)):
        other = runs(candidate({"max_num_seqs": 64, "max_num_batched_tokens": budget}))
        assert other is not None and reach.same_run(ran, other) is same


def _fleet() -> Fleet:
    c = catalog()
    return Fleet(Candidate("T4", 1).engine_config(), c.gpu("T4"), c.model("Qwen2.5-3B"), 1,
                 coeffs=c.coefficients)  # fmt: skip


def test_a_stop_ends_the_run_with_the_records_so_far() -> None:
    arrivals = build_arrivals(load(4.0))
    seen: list[int] = []

    def third(records: object) -> bool:
        assert isinstance(records, list)
        seen.append(len(records))
        return len(records) >= 3

    result = runner.run(arrivals.requests, _fleet(), arrivals.until, stop=third)
    # an event may finish several requests at once: the run ends at the first that made three
    assert result.stopped and len(result.records) == seen[-1] >= 3 > seen[-2]
    assert not runner.run(arrivals.requests[:5], _fleet(), arrivals.until).stopped


def test_an_overload_stops_early(monkeypatch: pytest.MonkeyPatch) -> None:
    """Far over what a pod serves, the replay stops long before its end: what it is for."""
    c, w, s = Candidate("T4", 1), load(40.0, horizon=60.0), setting(Target(1.0, 0.1))
    arrivals = build_arrivals(w)
    records: list[int] = []
    whole_run = runner.run

    def counted(*args: Any, **kwargs: Any) -> runner.RunResult:
        result = whole_run(*args, **kwargs)
        records.append(len(result.records))
        return result

    monkeypatch.setattr(runner, "run", counted)
    point, _ = evaluate_unless_missed(c, w, arrivals, s, LABEL)
    assert point is None and records[0] < len(arrivals.requests) / 2
