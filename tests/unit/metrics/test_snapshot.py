"""query_snapshot over recorded answers: figures and the quality verdict, as whole snapshots."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import pytest

from tests.unit.metrics.fake import FakePrometheus, Recording, load
from vllm_operator.metrics.prometheus import QueryFailure, query_snapshot
from vllm_operator.metrics.queries import Figure
from vllm_operator.planning.lengths import Empirical
from vllm_operator.tuning.model import FleetView, MetricsSnapshot, PodFigures

POD_A, POD_B = "chat-6d5f8b7c9-x2x4q", "chat-6d5f8b7c9-k8m2p"
TRAFFIC = load("traffic-two-pods.json")
IDLE = load("idle-two-pods.json")
ONE_DOWN = load("one-of-two-down.json")
NOTHING = load("no-series.json")
FLEET = FleetView(desired=2, ready=2, updated=2, rolling=False)
# vLLM's 1-2-5 token buckets up to max_model_len 32768; the twin's prompts are 6 tokens long,
# its outputs 20-50 tokens.
TOKEN_EDGES = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1e3, 2e3, 5e3, 1e4, 2e4)
PROMPTS = Empirical(TOKEN_EDGES, (0.0, 0.0, 0.0, *[1.0] * 11))
OUTPUTS = Empirical(TOKEN_EDGES, (0.0, 0.0, 0.0, 0.0, 0.0, *[1.0] * 9))

# traffic-two-pods.json, as Prometheus wrote the numbers.
ADMITTED, REJECTED = 0.10205181863477827, 0.16899252615844546
TRAFFIC_SNAPSHOT = MetricsSnapshot(
    observed_at=TRAFFIC.now,
    window_seconds=120.0,
    quality="ok",
    pods_expected=2,
    pods_scraped=2,
    request_rate=ADMITTED + REJECTED,
    rejection_rate=REJECTED,
    rejection_ratio=REJECTED / (ADMITTED + REJECTED),
    ttft_p95=0.03900000000000001,
    itl_p95=0.0095,
    queue_time_p95=0.28500000000000003,
    e2e_p95=0.49,
    waiting=0.0,
    running=0.0,
    kv_usage=0.0,
    preemption_rate=0.0,
    prompt_tokens_per_request=6.000000000000001,
    pods=(
        PodFigures(
            POD_B, running=0.0, waiting=0.0, kv_usage=0.0, up=True, sample_age=0.16000008583068848
        ),
        PodFigures(
            POD_A, running=0.0, waiting=0.0, kv_usage=0.0, up=True, sample_age=0.6800000667572021
        ),
    ),
    fleet=FLEET,
    admitted_rate=ADMITTED,
    rejection_rate_by_reason={"max_num_queued_reqs": REJECTED, "max_num_queued_tokens": 0.0},
    sample_age=0.16000008583068848,
    prompt_lengths=PROMPTS,
    output_lengths=OUTPUTS,
)


def snapshot(
    rec: Recording,
    *,
    expected: int = 2,
    stale_after: float = 30,
    failures: list[QueryFailure] | None = None,
    now: datetime | None = None,
) -> MetricsSnapshot:
    return query_snapshot(
        FakePrometheus(rec),
        rec.namespace,
        rec.name,
        window=rec.window,
        now=now or rec.now,
        expected_pods=expected,
        fleet=FLEET,
        stale_after=stale_after,
        on_error=None if failures is None else failures.append,
    )


def test_traffic_on_two_pods_is_ok_with_every_figure() -> None:
    failures: list[QueryFailure] = []
    assert snapshot(TRAFFIC, failures=failures) == TRAFFIC_SNAPSHOT
    assert failures == []


def test_every_query_is_asked_once_at_the_snapshot_time() -> None:
    fake = FakePrometheus(TRAFFIC)
    query_snapshot(
        fake, "team-a", "chat", window=120, now=TRAFFIC.now, expected_pods=2, fleet=None,
        stale_after=30,
    )  # fmt: skip
    assert fake.calls == [(q, {"time": TRAFFIC.time}) for q in TRAFFIC.queries().values()]
    # a fixed count per service, whatever its pods: the two token histograms share one query,
    # so a pass over 1,000 services asks 17,000 queries
    assert len(fake.calls) == 17


def test_idle_service_has_no_latencies_and_is_ok() -> None:
    # Recorded before any request: histogram_quantile and 0/0 answer NaN, which is no traffic.
    snap = snapshot(IDLE)
    assert (snap.quality, snap.problem) == ("ok", None)
    assert snap.figures() == {
        "request_rate": 0.0,
        "rejection_rate": 0.0,
        "waiting": 0.0,
        "running": 0.0,
        "kv_usage": 0.0,
        "preemption_rate": 0.0,
    }
    assert (snap.admitted_rate, snap.rejection_ratio, snap.pods_scraped) == (0.0, None, 2)


def test_infinite_ratio_without_finished_requests_is_no_traffic() -> None:
    # Prompt tokens counted at prefill while nothing finished yet: x/0 = +Inf.
    rec = IDLE.with_values("prompt_tokens_per_request", {"": "+Inf"})
    assert (snapshot(rec).quality, snapshot(rec).prompt_tokens_per_request) == ("ok", None)


def test_a_stopped_pod_makes_the_snapshot_partial() -> None:
    snap = snapshot(ONE_DOWN)
    assert (snap.quality, snap.pods_scraped, snap.pods_expected) == ("partial", 1, 2)
    assert snap.problem == (
        "Only 1 of 2 expected pods of team-a/chat are scraped: chat-6d5f8b7c9-k8m2p is down."
    )
    assert snap.pods == (
        PodFigures(POD_B, running=0.0, waiting=0.0, kv_usage=0.0, up=False, sample_age=None),
        PodFigures(
            POD_A, running=0.0, waiting=0.0, kv_usage=0.0, up=True, sample_age=0.5759999752044678
        ),
    )
    # The figures of the pods still scraped are kept for the status.
    assert snap.ttft_p95 == 0.039


@pytest.mark.parametrize(
    ("rec", "expected", "problem"),
    [
        (
            TRAFFIC,
            3,
            "Only 2 of 3 expected pods of team-a/chat are scraped: 1 expected pod has no series.",
        ),
        (
            TRAFFIC.with_values("pod_sample_age", {POD_A: "0.5", POD_B: "45.2"}),
            2,
            "Only 1 of 2 expected pods of team-a/chat are scraped:"
            " chat-6d5f8b7c9-k8m2p was last sampled 45s ago.",
        ),
        (
            TRAFFIC.with_values("pod_sample_age", {POD_A: "0.5"}),
            4,
            "Only 1 of 4 expected pods of team-a/chat are scraped:"
            " chat-6d5f8b7c9-k8m2p has no engine samples, 2 expected pods have no series.",
        ),
    ],
    ids=["unseen-pod", "one-pod-stale", "no-engine-samples"],
)
def test_partial(rec: Recording, expected: int, problem: str) -> None:
    snap = snapshot(rec, expected=expected)
    assert (snap.quality, snap.problem) == ("partial", problem)


def test_no_finished_request_leaves_the_lengths_unmeasured() -> None:
    snap = snapshot(IDLE)
    assert (snap.prompt_lengths, snap.output_lengths) == (None, None)


def test_a_histogram_without_series_leaves_only_its_lengths_unmeasured() -> None:
    prompt_only = [s for s in TRAFFIC.result("lengths") if s["metric"].get("histogram") == "prompt"]
    snap = snapshot(TRAFFIC.with_result("lengths", prompt_only))
    assert (snap.prompt_lengths, snap.output_lengths, snap.quality) == (PROMPTS, None, "ok")


def test_more_pods_than_expected_during_a_rollout_is_ok() -> None:
    assert snapshot(TRAFFIC, expected=1) == dataclasses.replace(TRAFFIC_SNAPSHOT, pods_expected=1)


def test_newest_sample_older_than_stale_after_is_stale() -> None:
    rec = TRAFFIC.with_values("pod_sample_age", {POD_A: "95.4", POD_B: "130"})
    snap = snapshot(rec, stale_after=30)
    assert (snap.quality, snap.problem, snap.sample_age) == (
        "stale",
        "The newest engine sample of team-a/chat is 95s old (stale after 30s).",
        95.4,
    )
    assert snap.pods_scraped == 0


@pytest.mark.parametrize(
    ("rec", "expected", "problem"),
    [
        (
            NOTHING,
            1,
            'Prometheus has no series labelled namespace="team-a",'
            ' serving_vllmop_io_vllmservice="gone"; is the VLLMService\'s PodMonitor or'
            " ServiceMonitor installed and scraped?",
        ),
        (NOTHING, 0, "team-a/gone has no pods to measure (0 expected)."),
        (
            TRAFFIC.with_values("pod_up", {POD_A: "0", POD_B: "0"}).with_result(
                "pod_sample_age", []
            ),
            2,
            "All 2 scrape targets of team-a/chat are down (up=0).",
        ),
        (
            TRAFFIC.with_result("pod_sample_age", []),
            2,
            "Prometheus scrapes 2 targets of team-a/chat (0 down) but has no vllm:* samples"
            " from them; is --disable-log-stats set?",
        ),
    ],
    ids=["no-series", "no-pods", "all-down", "no-engine-metrics"],
)
def test_missing(rec: Recording, expected: int, problem: str) -> None:
    snap = snapshot(rec, expected=expected)
    assert snap.quality == "missing"
    assert snap.problem == problem
    assert snap.figures() == {}


def test_missing_keeps_the_targets_it_knows() -> None:
    rec = TRAFFIC.with_values("pod_up", {POD_A: "0"}).with_result("pod_sample_age", [])
    assert snapshot(rec).pods == (PodFigures(POD_A, up=False),)


@pytest.mark.parametrize(
    ("figure", "values", "label", "problem"),
    [
        ("ttft_p95", {"": "NaN"}, "pod", "ttft_p95 is NaN while 0.102 requests/s finished"),
        ("e2e_p95", {"": "+Inf"}, "pod", "e2e_p95 is +Inf while 0.102 requests/s finished"),
        ("running", {"": "-1"}, "pod", "running is negative (-1)"),
        ("preemption_rate", {"": "NaN"}, "pod", "preemption_rate is NaN"),
        ("kv_usage", {"": "1.25"}, "pod", "kv_usage is 1.25, above 1"),
        ("admitted_rate", {"": "-0.5"}, "pod", "admitted_rate is negative (-0.5)"),
        (
            "rejection_rate_by_reason",
            {"max_num_queued_reqs": "-2", "max_num_queued_tokens": "0"},
            "reason",
            "rejection rate max_num_queued_reqs is negative (-2)",
        ),
        (
            "pod_kv_usage",
            {POD_A: "0.5", POD_B: "3"},
            "pod",
            "kv_usage of chat-6d5f8b7c9-k8m2p is 3, above 1",
        ),
        (
            "pod_waiting",
            {POD_A: "0", POD_B: "-Inf"},
            "pod",
            "waiting of chat-6d5f8b7c9-k8m2p is -Inf",
        ),
    ],
)
def test_impossible_values_are_invalid_and_left_out(
    figure: Figure, values: dict[str, str], label: str, problem: str
) -> None:
    snap = snapshot(TRAFFIC.with_values(figure, values, label))
    assert (snap.quality, snap.problem) == (
        "invalid",
        f"Prometheus gave unusable figures for team-a/chat: {problem}.",
    )
    numbers = [*snap.figures().values(), *snap.rejection_rate_by_reason.values()]
    assert all(0 <= n < float("inf") for n in numbers)


def test_nan_latency_while_only_rejections_arrive_is_no_traffic() -> None:
    # Rejected requests never reach the histograms (docs/vllm-0.33.md §2.3).
    rec = IDLE.with_values(
        "rejection_rate_by_reason", {"max_num_queued_reqs": "4"}, "reason"
    ).with_values("ttft_p95", {"": "NaN"})
    snap = snapshot(rec)
    assert (snap.quality, snap.request_rate, snap.rejection_ratio, snap.ttft_p95) == (
        "ok",
        4.0,
        1.0,
        None,
    )


def test_no_rejection_series_leaves_request_rate_unmeasured() -> None:
    # vLLM before 0.32 has no admission counter: the rate would silently count admitted only.
    snap = snapshot(TRAFFIC.with_result("rejection_rate_by_reason", []))
    assert (snap.quality, snap.admitted_rate, snap.request_rate, snap.rejection_ratio) == (
        "ok",
        ADMITTED,
        None,
        None,
    )


def test_several_problems_are_listed_in_one_sentence() -> None:
    rec = TRAFFIC.with_values("ttft_p95", {"": "NaN"}).with_values("running", {"": "-3"})
    assert snapshot(rec).problem == (
        "Prometheus gave unusable figures for team-a/chat:"
        " ttft_p95 is NaN while 0.102 requests/s finished; running is negative (-3)."
    )


def test_a_naive_now_is_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        snapshot(TRAFFIC, now=datetime(2026, 11, 29, 12, 0))


@pytest.mark.parametrize(
    ("answer", "expected", "quality"),
    [("3.5", 3.5, "ok"), ("0", 0.0, "ok"), ("NaN", None, "ok"), ("-1", None, "invalid"),
     ("+Inf", None, "invalid")],
)  # fmt: skip
def test_the_arrival_dispersion_is_kept_or_named(
    answer: str, expected: float | None, quality: str
) -> None:
    """NaN is 0 / 0 (the aligned bins missed a service's first seconds): not measured, and
    the snapshot stays ok; a negative or infinite one no query gives makes it invalid."""
    rec = dataclasses.replace(TRAFFIC, window=300.0).with_values("arrival_dispersion", {"": answer})
    snap = query_snapshot(
        FakePrometheus(rec), rec.namespace, rec.name, window=300.0, now=rec.now,
        expected_pods=2, fleet=FLEET, stale_after=30,
    )  # fmt: skip
    assert (snap.arrival_dispersion, snap.quality) == (expected, quality)
    if quality == "invalid":
        assert snap.problem is not None and "arrival_dispersion is" in snap.problem
