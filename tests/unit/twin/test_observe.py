"""vllm_twin/observe.py: Prometheus' view of a simulated fleet, and the snapshot built on it."""

from __future__ import annotations

import dataclasses
import math
import random
from datetime import UTC, datetime

import pytest

from tests.unit.sim.helpers import H100, LLAMA8
from vllm_operator.sim.engine import EngineConfig, RequestRecord
from vllm_operator.sim.fleet import Fleet
from vllm_operator.sim.report import percentile
from vllm_operator.sim.runner import run
from vllm_operator.sim.workload import LengthDist, poisson
from vllm_twin.observe import (
    ObservedFleet,
    PodHistograms,
    PodSample,
    ScrapeStore,
    bucket_quantile,
    extrapolated_rate,
    fleet_view,
    observe_snapshot,
    past_period,
    scrape_fleet,
)
from vllm_twin.server import buckets

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
CFG = EngineConfig(max_model_len=4096)
ZERO = {
    "success": 0.0,
    "preemptions": 0.0,
    "prompt_tokens": 0.0,
    "sum:prompt": 0.0,
    "sum:output": 0.0,
}


# ------------------------------------------------------------------------- PromQL functions
def test_rate_extrapolates_to_the_window_edges_like_prometheus() -> None:
    # samples 15 s apart inside (0, 60]: the first sits 15 s from the start, under 1.1 intervals,
    # so the increase is stretched over the full window
    points = [(15.0, 100.0), (30.0, 115.0), (45.0, 130.0), (60.0, 145.0)]
    assert extrapolated_rate(points, 0.0, 60.0) == pytest.approx(1.0)


def test_rate_does_not_extrapolate_below_the_counters_zero() -> None:
    # a counter that starts at 0 on the first sample started there: no increase before it
    points = [(15.0, 0.0), (30.0, 15.0), (45.0, 30.0), (60.0, 45.0)]
    assert extrapolated_rate(points, 0.0, 60.0) == pytest.approx(45 / 60)


def test_rate_counts_across_a_counter_reset() -> None:
    points = [(20.0, 10.0), (40.0, 20.0), (60.0, 5.0)]  # reset to 0 between 40 and 60
    # increase 5 - 10 + 20 = 15 over 40 s sampled, stretched to the start (20 s < 1.1 x 20 s)
    assert extrapolated_rate(points, 0.0, 60.0) == pytest.approx(15 * 60 / 40 / 60)


def test_quantile_interpolates_inside_the_bucket_like_histogram_quantile() -> None:
    # 10 in (0, 1], 10 in (2, 4]: rank 19 of 20 is 9/10 into the (2, 4] bucket
    assert bucket_quantile(0.95, [1.0, 2.0, 4.0], [10, 10, 20, 20]) == pytest.approx(3.8)
    # in the +Inf bucket Prometheus answers the highest finite bound
    assert bucket_quantile(0.95, [1.0, 2.0], [0, 10, 20]) == 2.0
    assert math.isnan(bucket_quantile(0.95, [1.0, 2.0], [0, 0, 0]))


def _record(ttft: float, gaps: list[float]) -> RequestRecord:
    times = [ttft]
    for gap in gaps:
        times.append(times[-1] + gap)
    return RequestRecord("r", 0.0, 0.0, ttft, times[-1], 10, len(times), 0, "length", tuple(times))


def test_histograms_count_each_gap_and_bounds_are_inclusive() -> None:
    h = PodHistograms()
    h.observe(_record(0.5, [0.5, 0.25, 1.0]))  # exact binary fractions; 0.5 and 1.0 are bounds
    cum = h.cumulative()
    ttft = dict(zip(buckets.TIME_TO_FIRST_TOKEN, cum["ttft_p95"], strict=False))
    assert ttft[0.25] == 0 and ttft[0.5] == 1
    itl = dict(zip(buckets.INTER_TOKEN_LATENCY, cum["itl_p95"], strict=False))
    assert itl[0.2] == 0 and itl[0.3] == 1 and itl[0.5] == 2 and itl[0.75] == 2 and itl[1.0] == 3
    assert cum["itl_p95"][-1] == 3 and cum["e2e_p95"][-1] == 1


# -------------------------------------------------------------------------------- the store
def _sample(t: float, success: float, running: float = 1.0) -> PodSample:
    counters = {**ZERO, "success": success}
    counters |= {"rejected:max_num_queued_reqs": 0.0, "rejected:max_num_queued_tokens": 0.0}
    cum = PodHistograms().cumulative()
    return PodSample(t, running, 0.0, 0.5, counters, cum)


def test_answers_sum_pods_and_keep_series_of_gone_pods_within_the_window() -> None:
    store = ScrapeStore()
    for t in (15.0, 30.0, 45.0, 60.0):
        gone = {"b": _sample(t, t, running=3.0)} if t <= 30 else {}
        store.scrape(t, {"a": _sample(t, t, running=1.0), **gone})
    answers = store.answers(60.0, 60.0)
    assert [s.labels["pod"] for s in answers["pod_up"]] == ["a"]  # instant: the latest targets
    (running,) = answers["running"]
    assert running.value == pytest.approx(1.0 + 3.0)  # avg_over_time per series, then summed
    (admitted,) = answers["admitted_rate"]
    # a: 45 over 45 s sampled, stretched 15 s to the window start (its zero is at t=0): 1/s
    # b: 15 over 15 s, stretched 15 s to the start and half an interval (7.5 s) past its end
    assert admitted.value == pytest.approx(1.0 + 15 * (15 + 15 + 7.5) / 15 / 60)
    assert math.isnan(answers["ttft_p95"][0].value)  # no observation: NaN, as Prometheus


def test_the_arrival_dispersion_counts_each_increment_in_one_30s_bin() -> None:
    """Five requests a scrape (15 s), and 60 more in the scrape at 615 s: the bins ending at
    630 ... 900 count 70 once and 10 otherwise; the changes are +60 and -60 among ten, the
    largest left out, so (3600 / 9) / (2 x 16) = 12.5. A restarted engine's counter (back to 0)
    counts 0 in its bin, not minus its total."""
    store = ScrapeStore(retention=math.inf)
    total = 0.0
    for k in range(1, 61):  # every 15 s up to t = 900
        total += 5 + (60 if k * 15 == 615 else 0)
        store.scrape(k * 15.0, {"a": _sample(k * 15.0, total)})
    assert store.arrival_dispersion(900.0, 300.0) == pytest.approx(12.5)
    (answer,) = store.answers(900.0, 300.0)["arrival_dispersion"]
    assert answer.value == pytest.approx(12.5)
    assert "arrival_dispersion" not in store.answers(900.0, 120.0)  # a short window: not asked
    store.scrape(915.0, {"a": _sample(915.0, 5.0)})  # restarted: counts from 0 again
    store.scrape(930.0, {"a": _sample(930.0, 10.0)})
    assert store._count(930.0, 30.0) == 0.0


def test_a_step_in_the_load_reads_as_steady() -> None:
    """30 requests a bin, then 90 from 750 s on: one change of 60 among ten, left out."""
    store = ScrapeStore(retention=math.inf)
    total = 0.0
    for k in range(1, 61):
        total += 15 if k * 15 <= 750 else 45
        store.scrape(k * 15.0, {"a": _sample(k * 15.0, total)})
    assert store.arrival_dispersion(900.0, 300.0) == 0.0


@pytest.mark.parametrize("gap", [0, 1, 2])
def test_a_pod_replaced_under_a_steady_load_reads_as_steady(gap: int) -> None:
    """100 requests a scrape on one pod, whose load a new pod takes over at 600 s, `gap`
    scrapes after the old one stopped answering (a rollout). The bins whose two ends see other
    pods have no count, so the rest read exactly steady. Summed over the pods present at both
    ends instead, the bin after the handover counts the old pod's last requests and none of the
    new one's: a change of 200 down and 200 up, (200^2 / 9) / (2 x 180) = 12.3, read as bursts
    of (12.3 + 1) / 2 = 6.7 requests."""
    store = ScrapeStore(retention=math.inf)
    for k in range(1, 61):
        now = k * 15.0
        if now <= 600:
            store.scrape(now, {"old": _sample(now, 100.0 * k)})
        elif now > 600 + 15 * gap:
            store.scrape(now, {"new": _sample(now, 100.0 * (k - 40 - gap))})
        else:
            store.scrape(now, {})  # neither answers: the old one left, the new one loads
    assert store.arrival_dispersion(900.0, 300.0) == 0.0
    assert store._count(630.0, 30.0) is None  # the old pod at 600, the new one at 630


def test_a_steady_load_has_a_dispersion_of_about_one() -> None:
    """Poisson arrivals at 2/s on two pods, finished as they arrive: the counts vary as
    Poisson counts do (ten of them: the estimate is within about a factor of 2)."""
    rng, store = random.Random(3), ScrapeStore(retention=math.inf)
    t, arrivals = 0.0, []
    while (t := t + rng.expovariate(2.0)) < 600:
        arrivals.append(t)
    pods = {"a": arrivals[0::2], "b": arrivals[1::2]}  # round robin
    for k in range(1, 41):
        now = k * 15.0
        store.scrape(
            now, {pod: _sample(now, sum(1 for a in mine if a <= now)) for pod, mine in pods.items()}
        )
    found = store.arrival_dispersion(600.0, 300.0)
    assert found is not None and 0.4 < found < 2.0


def test_a_down_target_is_listed_but_has_no_sample_age() -> None:
    store = ScrapeStore()
    store.scrape(15.0, {"a": _sample(15.0, 0.0), "b": None})
    answers = store.answers(15.0, 300.0)
    assert {s.labels["pod"]: s.value for s in answers["pod_up"]} == {"a": 1.0, "b": 0.0}
    assert [s.labels["pod"] for s in answers["pod_sample_age"]] == ["a"]
    assert answers["admitted_rate"] == []  # one sample: rate() has nothing to say


def test_the_past_period_is_the_request_rate_at_each_step_back_then() -> None:
    # one pod serving 1 req/s for the first 20 minutes, then 3 req/s; plus 0.5 refused/s
    store = ScrapeStore(retention=math.inf)
    done = refused = 0.0
    for k in range(1, 161):  # every 15 s up to t = 2400
        t = 15.0 * k
        done += 15.0 * (1.0 if t <= 1200 else 3.0)
        refused += 7.5
        sample = _sample(t, done)
        counters = {**sample.counters, "rejected:max_num_queued_reqs": refused}
        store.scrape(t, {"a": dataclasses.replace(sample, counters=counters)})
    assert store.request_rate(600.0, 120.0) == pytest.approx(1.5)
    assert store.request_rate(2400.0, 120.0) == pytest.approx(3.5)
    assert store.request_rate(-30.0, 120.0) is None  # nothing kept then
    # a period of 30 minutes, asked at t = 2400: steps from 600 - 600 to 600 + 900, every 60 s
    past = past_period(store, 2400.0, window=120.0, period=1800.0, epoch=EPOCH)
    times = [(s.at - EPOCH).total_seconds() for s in past.rates]
    assert times[0] == 60.0 and times[-1] == 1500.0 and len(times) == 25  # none before data
    by_time = dict(zip(times, (s.rate for s in past.rates), strict=True))
    assert by_time[600.0] == pytest.approx(1.5) and by_time[1500.0] == pytest.approx(3.5)
    # asked at t = 1900, the span would reach 1000 s past now - period: no step at or after now
    early = past_period(store, 1900.0, window=120.0, period=900.0, epoch=EPOCH)
    assert max((s.at - EPOCH).total_seconds() for s in early.rates) < 1900.0


# -------------------------------------------------------------------------------- the fleet
def _workload(rate: float = 6.0, duration: float = 300.0) -> list:  # type: ignore[type-arg]
    prompt, output = LengthDist("exponential", 400, cap=3000), LengthDist("exponential", 60)
    return poisson(rate, duration, prompt, output, seed=5)


def test_snapshot_of_a_steady_fleet_matches_what_the_clients_saw() -> None:
    fleet = ObservedFleet(CFG, H100, LLAMA8, 2)
    store = ScrapeStore()
    snaps = []

    def tick(now: float, _fleet: Fleet) -> None:
        scrape_fleet(store, fleet, now)
        if now == 300.0:
            snaps.append(observe_snapshot(store, fleet, now, window=300.0, epoch=EPOCH,
                                          stale_after=180.0))  # fmt: skip

    result = run(_workload(), fleet, 300.0, tick, 15.0, drain=False)
    (snap,) = snaps
    assert snap.quality == "ok" and snap.pods_scraped == 2 and snap.fleet is not None
    done = [r.record for r in result.records if r.record is not None]
    assert snap.request_rate == pytest.approx(len(done) / 300.0, rel=0.1)
    truth = percentile(sorted(r.ttft for r in done), 95)
    # the quantile lies inside the bucket holding the true p95
    bounds = (0.0, *buckets.TIME_TO_FIRST_TOKEN)
    k = next(i for i, b in enumerate(bounds) if b >= truth)
    assert snap.ttft_p95 is not None and bounds[k - 1] <= snap.ttft_p95 <= bounds[k]
    assert snap.rejection_ratio == 0.0 and snap.kv_usage is not None
    # the token histograms: their _sum gives the requests' exact mean (to the scrapes' window
    # edges), not only the 1-2-5 buckets' resolution
    assert snap.prompt_lengths is not None and snap.output_lengths is not None
    prompts = sum(r.prompt_tokens for r in done) / len(done)
    outputs = sum(r.output_tokens for r in done) / len(done)
    assert snap.prompt_lengths.exact_mean is not None
    assert snap.prompt_lengths.mean == pytest.approx(prompts, rel=0.03)
    assert snap.output_lengths.mean == pytest.approx(outputs, rel=0.03)


def test_every_finished_request_is_observed_once_across_resizes() -> None:
    fleet = ObservedFleet(CFG, H100, LLAMA8, 1)

    def tick(now: float, f: Fleet) -> None:
        if now == 30.0:
            f.set_replicas(3, now, ready_delay=20.0)
        if now == 90.0:
            f.set_replicas(1, now)

    result = run(_workload(duration=120.0), fleet, 120.0, tick, 15.0)
    done = sum(1 for r in result.records if r.record is not None)
    assert sum(h.cumulative()["e2e_p95"][-1] for h in fleet.histograms.values()) == done


def test_new_replicas_make_the_snapshot_partial_and_a_restart_rolls() -> None:
    fleet = ObservedFleet(CFG, H100, LLAMA8, 1)
    store = ScrapeStore()
    seen = {}

    def tick(now: float, f: Fleet) -> None:
        scrape_fleet(store, fleet, now)
        if now == 60.0:
            f.set_replicas(2, now, ready_delay=60.0)
        if now == 240.0:
            f.restart_all(dataclasses.replace(CFG, max_num_seqs=64), now, 30.0, max_unavailable=1)
        if now in (90.0, 180.0, 255.0):
            seen[now] = observe_snapshot(store, fleet, now, window=120.0, epoch=EPOCH,
                                         stale_after=180.0)  # fmt: skip

    run(_workload(duration=300.0), fleet, 300.0, tick, 15.0, drain=False)
    assert seen[90.0].quality == "partial"  # the new pod is a target that refuses (loading)
    assert seen[90.0].fleet == fleet_view_at(desired=2, ready=1, updated=2, rolling=False)
    assert seen[180.0].quality == "ok"
    rolling = seen[255.0].fleet
    assert rolling is not None and rolling.rolling and rolling.updated == 1


def fleet_view_at(**kw: object) -> object:
    from vllm_operator.tuning.model import FleetView

    return FleetView(**kw)  # type: ignore[arg-type]


def test_fleet_view_counts_starting_replicas_as_desired() -> None:
    fleet = Fleet(CFG, H100, LLAMA8, 1)
    fleet.set_replicas(3, 0.0, ready_delay=10.0)
    view = fleet_view(fleet)
    assert (view.desired, view.ready, view.updated, view.rolling) == (3, 1, 3, False)
