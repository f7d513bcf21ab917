"""The PromQL each figure is read with, and the label contract that ties it to one VLLMService."""

from __future__ import annotations

import pytest

from vllm_operator.constants import LABEL_CANARY, LABEL_SERVICE
from vllm_operator.metrics.queries import (
    CANARY_LABEL,
    SERVICE_LABEL,
    build_range,
    build_selector,
    build_snapshot_queries,
)
from vllm_operator.render.monitoring import POD_TARGET_LABELS
from vllm_twin.harness.targets import prometheus_label_name

S = '{namespace="team-a",serving_vllmop_io_vllmservice="chat"}'
_M = f"vllm:request_success_total{S}"


def _bin(at: str, earlier: str) -> str:
    """One bin's count, only where the same series answer at both instants."""
    pairs = f"({_M}{at} - {_M}{earlier})"
    return (
        f"(sum(clamp_min({pairs}, 0)) and on() (count({pairs}) == count({_M}{at}))"
        f" and on() (count({pairs}) == count({_M}{earlier})))"
    )


COUNT = _bin("", " offset 30s")
BEFORE = _bin(" offset 30s", " offset 60s")
CHANGES = f"(({COUNT} - {BEFORE}) ^ 2)[300s:30s]"


def test_every_query_of_a_snapshot() -> None:
    assert build_snapshot_queries("team-a", "chat", 300) == {
        "pod_up": f"max by (pod) (up{S})",
        "pod_sample_age": f"time() - max by (pod) (timestamp(vllm:num_requests_running{S}))",
        "admitted_rate": f"sum(rate(vllm:request_success_total{S}[300s]))",
        "rejection_rate_by_reason": (
            f"sum by (reason) (rate(vllm:admission_rejections_total{S}[300s]))"
        ),
        "ttft_p95": (
            "histogram_quantile(0.95, sum by (le)"
            f" (rate(vllm:time_to_first_token_seconds_bucket{S}[300s])))"
        ),
        "itl_p95": (
            "histogram_quantile(0.95, sum by (le)"
            f" (rate(vllm:inter_token_latency_seconds_bucket{S}[300s])))"
        ),
        "queue_time_p95": (
            "histogram_quantile(0.95, sum by (le)"
            f" (rate(vllm:request_queue_time_seconds_bucket{S}[300s])))"
        ),
        "e2e_p95": (
            "histogram_quantile(0.95, sum by (le)"
            f" (rate(vllm:e2e_request_latency_seconds_bucket{S}[300s])))"
        ),
        "waiting": f"sum(avg_over_time(vllm:num_requests_waiting{S}[300s]))",
        "running": f"sum(avg_over_time(vllm:num_requests_running{S}[300s]))",
        "kv_usage": f"max(avg_over_time(vllm:kv_cache_usage_perc{S}[300s]))",
        "preemption_rate": f"sum(rate(vllm:num_preemptions_total{S}[300s]))",
        "prompt_tokens_per_request": (
            f"sum(rate(vllm:prompt_tokens_total{S}[300s]))"
            f" / sum(rate(vllm:request_success_total{S}[300s]))"
        ),
        "pod_running": f"sum by (pod) (avg_over_time(vllm:num_requests_running{S}[300s]))",
        "pod_waiting": f"sum by (pod) (avg_over_time(vllm:num_requests_waiting{S}[300s]))",
        "pod_kv_usage": f"max by (pod) (avg_over_time(vllm:kv_cache_usage_perc{S}[300s]))",
        "lengths": (
            f"label_replace(sum by (le) (rate(vllm:request_prompt_tokens_bucket{S}[300s])),"
            ' "histogram", "prompt", "", "")'
            f" or label_replace(sum(rate(vllm:request_prompt_tokens_sum{S}[300s])),"
            ' "histogram", "prompt", "", "")'
            f" or label_replace(sum by (le) (rate(vllm:request_generation_tokens_bucket{S}"
            '[300s])), "histogram", "output", "", "")'
            f" or label_replace(sum(rate(vllm:request_generation_tokens_sum{S}[300s])),"
            ' "histogram", "output", "", "")'
        ),
        "arrival_dispersion": (
            f"(sum_over_time({CHANGES}) - max_over_time({CHANGES}))"
            f" / (count_over_time({CHANGES}) - 1) / (2 * avg_over_time({COUNT}[300s:30s]))"
        ),
    }


def test_a_window_of_fewer_than_eight_30s_bins_asks_no_dispersion() -> None:
    """Ten counts tell bursts from chance (observed_workload.POISSON_UP_TO); a window of a few
    gives noise, so it is not asked and the model replays plain Poisson arrivals."""
    assert "arrival_dispersion" in build_snapshot_queries("team-a", "chat", 240)
    assert "arrival_dispersion" not in build_snapshot_queries("team-a", "chat", 239)
    assert "arrival_dispersion" not in build_snapshot_queries("team-a", "chat", 20)


def test_the_service_label_is_the_pod_label_as_podtargetlabels_copies_it() -> None:
    # The monitor copies LABEL_SERVICE; the e2e harness labels twin targets the same way.
    assert LABEL_SERVICE in POD_TARGET_LABELS
    assert SERVICE_LABEL == prometheus_label_name(LABEL_SERVICE) == "serving_vllmop_io_vllmservice"


@pytest.mark.parametrize(
    ("namespace", "name", "selector"),
    [
        ("team-a", "chat", S),
        ("a", "b", '{namespace="a",serving_vllmop_io_vllmservice="b"}'),
        ("ns-1", "llama.v2-7b", '{namespace="ns-1",serving_vllmop_io_vllmservice="llama.v2-7b"}'),
        (
            "n" * 63,
            "c" * 63,
            f'{{namespace="{"n" * 63}",serving_vllmop_io_vllmservice="{"c" * 63}"}}',
        ),
    ],
)
def test_selector_for_kubernetes_names(namespace: str, name: str, selector: str) -> None:
    assert build_selector(namespace, name) == selector


def test_a_canary_pod_and_the_stable_pods_split_by_the_canary_label() -> None:
    # the monitors copy LABEL_CANARY onto the canary pod's series; stable pods have none, and
    # PromQL's != matches a series without the label
    assert LABEL_CANARY in POD_TARGET_LABELS
    assert CANARY_LABEL == prometheus_label_name(LABEL_CANARY) == "serving_vllmop_io_canary"
    base = 'namespace="team-a",serving_vllmop_io_vllmservice="chat"'
    assert build_selector("team-a", "chat", "canary") == f'{{{base},{CANARY_LABEL}="true"}}'
    assert build_selector("team-a", "chat", "stable") == f'{{{base},{CANARY_LABEL}!="true"}}'
    stable = build_snapshot_queries("team-a", "chat", 300, "stable")
    assert stable["ttft_p95"] == (
        "histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket"
        f'{{{base},{CANARY_LABEL}!="true"}}[300s])))'
    )


@pytest.mark.parametrize(
    ("namespace", "name", "message"),
    [
        (
            "team-a",
            'chat"} or vector(1) #',
            "VLLMService name 'chat\"} or vector(1) #' is not a Kubernetes name: lower-case"
            " letters, digits, '-' and '.', starting and ending with a letter or digit,"
            " at most 63 characters",
        ),
        (
            'x",namespace=~".*',
            "chat",
            "namespace 'x\",namespace=~\".*' is not a Kubernetes name: lower-case letters,"
            " digits and '-', starting and ending with a letter or digit, at most 63 characters",
        ),
        ("team.a", "chat", "namespace 'team.a' is not a Kubernetes name"),
        ("team-a", "Chat", "VLLMService name 'Chat' is not a Kubernetes name"),
        ("team-a", "chat\\", "VLLMService name 'chat\\\\' is not a Kubernetes name"),
        ("team-a", "chat\n", "VLLMService name 'chat\\n' is not a Kubernetes name"),
        ("team-a", "", "VLLMService name '' is not a Kubernetes name"),
        ("team-a", "-chat", "VLLMService name '-chat' is not a Kubernetes name"),
        ("team-a", "chat_1", "VLLMService name 'chat_1' is not a Kubernetes name"),
        ("team-a", "c" * 64, f"VLLMService name '{'c' * 64}' is not a Kubernetes name"),
        ("", "chat", "namespace '' is not a Kubernetes name"),
    ],
)
def test_names_that_could_escape_the_label_matcher_are_refused(
    namespace: str, name: str, message: str
) -> None:
    with pytest.raises(ValueError) as err:
        build_selector(namespace, name)
    assert str(err.value).startswith(message)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (300, "300s"),
        (60.0, "60s"),
        (1.5, "1500ms"),
        (0.25, "250ms"),
        (0.001, "1ms"),
        (86400, "86400s"),
    ],
)
def test_range(seconds: float, text: str) -> None:
    assert build_range(seconds) == text


@pytest.mark.parametrize("seconds", [0, -5, 0.0004, float("nan"), float("inf")])
def test_range_refuses_what_promql_cannot_express(seconds: float) -> None:
    with pytest.raises(ValueError, match="window"):
        build_range(seconds)
