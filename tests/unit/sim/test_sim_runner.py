"""The virtual-time runner: fleets, balancers, replica changes, determinism."""

from __future__ import annotations

import dataclasses

import pytest

from vllm_operator.sim.engine import EngineConfig, SimRequest, StepCoefficients
from vllm_operator.sim.fleet import Fleet
from vllm_operator.sim.report import Slo
from vllm_operator.sim.runner import RunResult, run
from vllm_operator.sim.workload import LengthDist, poisson

from .helpers import H100, LLAMA8

CFG = EngineConfig(max_model_len=4096)


def _fleet(replicas: int, **kw: object) -> Fleet:
    return Fleet(CFG, H100, LLAMA8, replicas, **kw)  # type: ignore[arg-type]


def _at(times: list[float], prompt: int = 200, out: int = 20) -> list[SimRequest]:
    return [SimRequest(f"q{i}", t, prompt, out) for i, t in enumerate(times)]


def _replicas(result: RunResult) -> dict[str, int | None]:
    return {r.request_id: r.replica for r in result.records}


def _workload(seed: int = 3) -> list[SimRequest]:
    dist = LengthDist("exponential", 300, cap=3000)
    return poisson(20.0, 15.0, dist, LengthDist("exponential", 100, cap=1000), seed=seed)


def test_same_seed_same_results_and_noise_follows_the_seed() -> None:
    first = run(_workload(), _fleet(2, balancer="least_outstanding"), 15.0)
    second = run(_workload(), _fleet(2, balancer="least_outstanding"), 15.0)
    assert first.records == second.records
    assert first.figures == second.figures
    noisy = StepCoefficients(step_noise=0.1)
    a = run(_workload(), _fleet(2, seed=1, coeffs=noisy), 15.0)
    b = run(_workload(), _fleet(2, seed=1, coeffs=noisy), 15.0)
    c = run(_workload(), _fleet(2, seed=2, coeffs=noisy), 15.0)
    assert a.records == b.records
    assert a.records != c.records


def test_round_robin_cycles_through_ready_replicas() -> None:
    result = run(_at([0.0, 0.1, 0.2, 0.3, 0.4, 0.5]), _fleet(3), 1.0)
    assert list(_replicas(result).values()) == [0, 1, 2, 0, 1, 2]


def test_least_outstanding_avoids_the_busy_replica() -> None:
    reqs = [
        SimRequest("long", 0.0, 200, 2000),  # busy for ~16 s
        SimRequest("short", 0.0, 200, 2),
        SimRequest("third", 1.0, 200, 2),
        SimRequest("fourth", 1.5, 200, 2),
    ]
    least = _replicas(run(reqs, _fleet(2, balancer="least_outstanding"), 2.0))
    assert least == {"short": 1, "third": 1, "fourth": 1, "long": 0}
    robin = _replicas(run(reqs, _fleet(2, balancer="round_robin"), 2.0))
    assert robin == {"short": 1, "third": 0, "fourth": 1, "long": 0}


def test_added_replicas_take_traffic_after_their_ready_delay() -> None:
    def scale_up(now: float, fleet: Fleet) -> None:
        if now == 1.0:
            fleet.set_replicas(2, now, ready_delay=5.0)

    reqs = _at([0.5 * i for i in range(20)])  # one every 0.5 s until 9.5 s
    result = run(reqs, _fleet(1), 10.0, on_tick=scale_up)
    placed = [(r.arrival, r.replica) for r in sorted(result.records, key=lambda r: r.arrival)]
    assert all(replica == 0 for at, replica in placed if at < 6.0)
    assert {replica for at, replica in placed if at >= 6.0} == {0, 1}
    assert [s.starting for s in result.samples[:6]] == [1, 1, 1, 1, 1, 0]


def test_removed_replica_drains_its_requests_and_gets_no_new_ones() -> None:
    def scale_down(now: float, fleet: Fleet) -> None:
        if now == 1.0:
            fleet.set_replicas(1, now)

    reqs = [SimRequest("a", 0.0, 200, 1000), SimRequest("b", 0.1, 200, 1000)]
    reqs += _at([1.5, 2.0, 2.5])
    fleet = _fleet(2)
    result = run(reqs, fleet, 3.0, on_tick=scale_down)
    by_id = {r.request_id: r for r in result.records}
    assert by_id["b"].replica == 1 and by_id["b"].outcome == "ok"  # finished on the drained one
    assert by_id["b"].record is not None and by_id["b"].record.output_tokens == 1000
    assert {by_id[q].replica for q in ("q0", "q1", "q2")} == {0}
    (gone,) = fleet.retired
    assert gone.id == 1
    assert gone.stopped_at == pytest.approx(by_id["b"].record.finished)


def test_restart_all_at_once_is_an_outage_and_brings_the_new_flags() -> None:
    new = dataclasses.replace(CFG, max_num_seqs=8)

    def restart(now: float, fleet: Fleet) -> None:
        if now == 2.0:
            fleet.restart_all(new, now, ready_delay=3.0)

    reqs = [SimRequest("inflight", 1.0, 200, 400), *_at([2.5, 4.5, 5.5, 6.0])]
    fleet = _fleet(2)
    result = run(reqs, fleet, 7.0, on_tick=restart)
    by_id = {r.request_id: r for r in result.records}
    assert by_id["inflight"].outcome == "ok"  # the old replica finished it while draining
    assert [by_id[q].reject_reason for q in ("q0", "q1")] == ["no_replica", "no_replica"]
    assert by_id["q2"].outcome == "ok" and by_id["q2"].replica in (2, 3)
    assert [r.config.max_num_seqs for r in fleet.live] == [8, 8]
    assert result.figures.rejected_by_reason == {"no_replica": 2}


def test_rolling_restart_keeps_a_replica_ready() -> None:
    def restart(now: float, fleet: Fleet) -> None:
        if now == 2.0:
            fleet.restart_all(dataclasses.replace(CFG, max_num_seqs=8), now, 3.0, max_unavailable=1)

    fleet = _fleet(2)
    result = run(_at([0.25 * i for i in range(40)]), fleet, 10.0, on_tick=restart)
    assert result.figures.rejected == 0
    assert [s.ready for s in result.samples] == [2, 1, 1, 1, 1, 1, 1, 2, 2, 2]
    assert fleet.rollout_short == 0  # both replaced
    assert sorted(r.id for r in fleet.live) == [2, 3]


def test_a_rollout_without_surge_is_short_a_pod_until_each_replacement_is_ready() -> None:
    fleet = _fleet(2)
    fleet.restart_all(dataclasses.replace(CFG, max_num_seqs=8), 0.0, 3.0, max_unavailable=1)
    shortfall = []
    for t in (1.0, 2.9, 3.0, 5.9, 6.0):
        fleet.advance_to(t)
        shortfall.append(fleet.rollout_short)
    assert shortfall == [1, 1, 1, 1, 0]  # the second wave starts as the first is ready


def test_a_surge_rollout_replaces_each_pod_only_once_its_successor_is_ready() -> None:
    new = dataclasses.replace(CFG, max_num_seqs=8)

    def restart(now: float, fleet: Fleet) -> None:
        if now == 2.0:
            fleet.restart_all(new, now, 3.0, max_surge=1)
            assert len(fleet.active) == 2  # the surge pod is not in the desired size

    fleet = _fleet(2)
    result = run(_at([0.25 * i for i in range(48)]), fleet, 12.0, on_tick=restart)
    assert result.figures.rejected == 0
    assert [s.ready for s in result.samples] == [2] * 12  # never one fewer
    assert not any(r.replaces for r in (*fleet.live, *fleet.retired))  # never short
    assert [s.starting for s in result.samples] == [0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0]
    assert sorted(r.id for r in fleet.live) == [2, 3]
    assert [r.config.max_num_seqs for r in fleet.live] == [8, 8]
    # each old pod stopped taking traffic when its successor came up, then drained
    assert [r.id for r in fleet.retired] == [1, 0]
    assert [r.ready_at for r in fleet.live] == [5.0, 8.0]
    assert all(r.stopped_at is not None and r.stopped_at >= 5.0 for r in fleet.retired)


def test_a_newer_surge_rollout_drops_the_older_ones_surge_pod() -> None:
    fleet = _fleet(1)
    fleet.restart_all(dataclasses.replace(CFG, max_num_seqs=8), 0.0, 3.0, max_surge=1)
    fleet.restart_all(dataclasses.replace(CFG, max_num_seqs=16), 1.0, 3.0, max_surge=1)
    (first_surge,) = fleet.retired
    assert first_surge.id == 1 and first_surge.stopped_at == 1.0
    fleet.advance_to(4.0)
    assert [(r.id, r.config.max_num_seqs) for r in fleet.live] == [(2, 16)]


def test_a_surge_pod_with_no_old_pod_left_to_replace_goes() -> None:
    fleet = _fleet(2)
    fleet.restart_all(dataclasses.replace(CFG, max_num_seqs=8), 0.0, 3.0, max_surge=1)
    fleet.set_replicas(0, 1.0)  # a scale-down took both old pods
    fleet.advance_to(3.0)
    assert fleet.live == [] and len(fleet.retired) == 3


def test_a_surge_rollout_loads_as_many_pods_at_once_as_its_width() -> None:
    new = dataclasses.replace(CFG, max_num_seqs=8)
    fleet = _fleet(3)
    fleet.restart_all(new, 0.0, 3.0, max_surge=2)
    assert [r.ready_at for r in fleet.live if r.surge] == [3.0, 3.0]
    fleet.advance_to(3.0)  # two replaced; the last old pod gets its successor now
    assert sum(1 for r in fleet.active if r.config == new) == 2
    assert [r.ready_at for r in fleet.live if r.surge] == [6.0]
    fleet.advance_to(6.0)
    assert [r.config for r in fleet.active] == [new] * 3 and not fleet.rollout_short
    assert not any(r.surge for r in fleet.live)


def test_a_surge_wider_than_the_fleet_loads_one_pod_per_replica() -> None:
    fleet = _fleet(2)
    fleet.restart_all(dataclasses.replace(CFG, max_num_seqs=8), 0.0, 3.0, max_surge=5)
    assert sum(1 for r in fleet.live if r.surge) == 2
    fleet.advance_to(3.0)
    assert len(fleet.active) == 2 and not any(r.surge for r in fleet.live)


@pytest.mark.parametrize(("surge", "unavailable"), [(1, 1), (3, 2), (-1, None)])
def test_a_surge_with_max_unavailable_or_below_zero_is_refused(
    surge: int, unavailable: int | None
) -> None:
    with pytest.raises(ValueError, match="max_surge must be 0, or >= 1 without max_unavailable"):
        _fleet(1).restart_all(CFG, 0.0, 1.0, max_unavailable=unavailable, max_surge=surge)


def test_restart_with_flags_vllm_refuses_raises_its_message() -> None:
    bad = dataclasses.replace(CFG, max_num_seqs=4, max_num_active_seqs=8)
    with pytest.raises(ValueError, match=r"max_num_active_seqs \(8\) cannot be greater than"):
        _fleet(1).restart_all(bad, 0.0, 1.0)


def test_vllm_rejections_and_slo_reach_the_figures() -> None:
    cfg = dataclasses.replace(CFG, max_num_queued_reqs=2)
    reqs = _at([0.0, 0.0, 0.0, 0.0, 2.0], prompt=500, out=50)
    fleet = Fleet(cfg, H100, LLAMA8, 1)
    result = run(reqs, fleet, 3.0, slo=Slo(ttft=10.0, itl=1.0))
    figures = result.figures
    assert (figures.offered, figures.completed, figures.rejected) == (5, 3, 2)
    assert figures.rejected_by_reason == {"max_num_queued_reqs": 2}
    assert figures.rejected_share == pytest.approx(0.4)
    assert figures.goodput_share == pytest.approx(0.6)  # all completed meet a loose SLO
    assert figures.output_tps == pytest.approx(150 / figures.window)
    assert 0 < figures.kv_usage_mean < figures.kv_usage_max < 0.01


def test_undrained_requests_are_reported_unfinished() -> None:
    result = run(_at([0.0], out=2000), _fleet(1), 1.0, drain=False)
    assert [r.outcome for r in result.records] == ["unfinished"]
    assert result.figures.unfinished == 1
