"""The vllm:* and http_* families: names, types, labels and buckets per docs/vllm-0.33.md §3."""

from __future__ import annotations

import re

import pytest

from vllm_operator.sim.engine import EngineStats, RequestEvent, RequestRecord, SimRequest
from vllm_twin.exposition import Registry
from vllm_twin.server import buckets
from vllm_twin.server.http_metrics import HttpMetrics
from vllm_twin.server.vllm_metrics import VllmMetrics

# docs/vllm-0.33.md §3.2, exposed names → type
ENGINE_FAMILIES = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:num_requests_waiting_by_reason": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:engine_sleep_state": "gauge",
    "vllm:cache_config_info": "gauge",
    "vllm:num_preemptions_total": "counter",
    "vllm:prompt_tokens_total": "counter",
    "vllm:prompt_tokens_by_source_total": "counter",
    "vllm:prompt_tokens_cached_total": "counter",
    "vllm:prompt_tokens_cached_by_source_total": "counter",
    "vllm:generation_tokens_total": "counter",
    "vllm:request_success_total": "counter",
    "vllm:admission_rejections_total": "counter",
    "vllm:prefix_cache_queries_total": "counter",
    "vllm:prefix_cache_hits_total": "counter",
    "vllm:external_prefix_cache_queries_total": "counter",
    "vllm:external_prefix_cache_hits_total": "counter",
    "vllm:mm_cache_queries_total": "counter",
    "vllm:mm_cache_hits_total": "counter",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:request_time_per_output_token_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
    "vllm:request_inference_time_seconds": "histogram",
    "vllm:request_prefill_time_seconds": "histogram",
    "vllm:request_decode_time_seconds": "histogram",
    "vllm:request_num_preemptions": "histogram",
    "vllm:request_prompt_tokens": "histogram",
    "vllm:request_generation_tokens": "histogram",
    "vllm:request_max_num_generation_tokens": "histogram",
    "vllm:request_params_max_tokens": "histogram",
    "vllm:request_prefill_kv_computed_tokens": "histogram",
    "vllm:request_params_n": "histogram",
    "vllm:iteration_tokens_total": "histogram",
}
CACHE_INFO = {
    "block_size": "16",
    "cache_dtype": "auto",
    "enable_prefix_caching": "True",
    "gpu_memory_utilization": "0.92",
    "num_gpu_blocks": "1000",
    "kv_cache_size_tokens": "16000",
    "kv_cache_max_concurrency": "3.91",
}
ME = 'model_name="m",engine="0"'


def make() -> tuple[Registry, VllmMetrics]:
    reg = Registry()
    return reg, VllmMetrics(reg, "m", 4096, CACHE_INFO)


def types(text: str) -> dict[str, str]:
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.MULTILINE))


def line(text: str, series: str) -> float:
    (value,) = re.findall(rf"^{re.escape(series)} (\S+)$", text, flags=re.MULTILINE)
    return float(value)


def test_every_engine_family_of_the_reference_with_its_type() -> None:
    reg, _ = make()
    assert types(reg.render()) == ENGINE_FAMILIES


def test_every_series_exists_from_the_start_with_the_engine_labels() -> None:
    text = make()[0].render()
    assert line(text, f"vllm:num_requests_running{{{ME}}}") == 0
    assert line(text, f"vllm:generation_tokens_total{{{ME}}}") == 0
    assert line(text, f"vllm:mm_cache_hits_total{{{ME}}}") == 0
    for reason in ("capacity", "deferred"):
        assert line(text, f'vllm:num_requests_waiting_by_reason{{{ME},reason="{reason}"}}') == 0
    for reason in ("stop", "length", "abort", "error", "repetition"):
        series = f'vllm:request_success_total{{{ME},finished_reason="{reason}"}}'
        assert line(text, series) == 0
    for source in ("local_compute", "local_cache_hit", "external_kv_transfer"):
        assert line(text, f'vllm:prompt_tokens_by_source_total{{{ME},source="{source}"}}') == 0
    assert line(text, f'vllm:engine_sleep_state{{{ME},sleep_state="awake"}}') == 1
    assert line(text, f'vllm:engine_sleep_state{{{ME},sleep_state="discard_all"}}') == 0
    assert line(text, f'vllm:time_to_first_token_seconds_bucket{{{ME},le="+Inf"}}') == 0
    assert line(text, f"vllm:time_to_first_token_seconds_count{{{ME}}}") == 0


def test_admission_rejections_carry_model_name_and_reason_only_both_at_zero() -> None:
    text = make()[0].render()
    series = re.findall(r"^vllm:admission_rejections_total(\{.*\}) (\S+)$", text, re.MULTILINE)
    assert series == [
        ('{model_name="m",reason="max_num_queued_reqs"}', "0.0"),
        ('{model_name="m",reason="max_num_queued_tokens"}', "0.0"),
    ]


def test_cache_config_info_is_one_with_the_cache_labels() -> None:
    labels = ",".join(f'{k}="{v}"' for k, v in CACHE_INFO.items())
    assert line(make()[0].render(), f"vllm:cache_config_info{{{ME},{labels}}}") == 1


REFERENCE_BUCKETS = {
    "time_to_first_token": [
        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
        10, 20, 40, 80, 160, 640, 2560,
    ],
    "inter_token_latency": [
        0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10,
        20, 40, 80,
    ],
    "request_latency": [
        0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960,
        1920, 7680,
    ],
    "iteration_tokens": [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384],
    "request_params_n": [1, 2, 5, 10, 20],
    "request_num_preemptions": [1, 2, 3, 4, 5, 10, 20],
    "http_highr": [
        0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 7.5,
        10, 30, 60,
    ],
    "http": [0.1, 0.5, 1],
}  # fmt: skip


def bounds(text: str, name: str) -> list[float]:
    les = re.findall(rf'^{re.escape(name)}_bucket\{{[^}}]*le="([^"]+)"\}}', text, re.MULTILINE)
    assert les[-1] == "+Inf"
    return [float(v) for v in les[:-1]]


@pytest.mark.parametrize(
    ("family", "names"),
    [
        ("time_to_first_token", ["vllm:time_to_first_token_seconds"]),
        (
            "inter_token_latency",
            ["vllm:inter_token_latency_seconds", "vllm:request_time_per_output_token_seconds"],
        ),
        (
            "request_latency",
            [
                "vllm:e2e_request_latency_seconds",
                "vllm:request_queue_time_seconds",
                "vllm:request_inference_time_seconds",
                "vllm:request_prefill_time_seconds",
                "vllm:request_decode_time_seconds",
            ],
        ),
        ("iteration_tokens", ["vllm:iteration_tokens_total"]),
        ("request_params_n", ["vllm:request_params_n"]),
        ("request_num_preemptions", ["vllm:request_num_preemptions"]),
    ],
)
def test_engine_histogram_buckets_equal_the_reference(family: str, names: list[str]) -> None:
    text = make()[0].render()
    for name in names:
        assert bounds(text, name) == REFERENCE_BUCKETS[family]


def test_request_token_histograms_use_the_1_2_5_series_up_to_max_model_len() -> None:
    text = make()[0].render()  # max_model_len 4096
    expected = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000]
    for name in (
        "vllm:request_prompt_tokens",
        "vllm:request_generation_tokens",
        "vllm:request_max_num_generation_tokens",
        "vllm:request_params_max_tokens",
        "vllm:request_prefill_kv_computed_tokens",
    ):
        assert bounds(text, name) == expected


def test_http_families_labels_and_buckets() -> None:
    reg = Registry()
    http = HttpMetrics(reg, elapsed=lambda: 0.0)
    http.record("POST", "/v1/completions", 503, 0.3, 100, 180)
    http.record("POST", "/v1/completions", 200, 0.05, 100, 20)
    http.record("GET", "/metrics", 200, 0.01, 0, 5000)  # excluded handler
    text = reg.render()
    assert types(text) == {
        "http_requests_total": "counter",
        "http_request_size_bytes": "summary",
        "http_response_size_bytes": "summary",
        "http_request_duration_highr_seconds": "histogram",
        "http_request_duration_seconds": "histogram",
    }
    req = 'http_requests_total{method="POST",status="%s",handler="/v1/completions"}'
    assert line(text, req % "5xx") == 1
    assert line(text, req % "2xx") == 1
    assert "/metrics" not in text
    assert bounds(text, "http_request_duration_highr_seconds") == REFERENCE_BUCKETS["http_highr"]
    assert bounds(text, "http_request_duration_seconds") == REFERENCE_BUCKETS["http"]
    assert line(text, 'http_request_size_bytes_sum{handler="/v1/completions"}') == 200
    assert line(text, 'http_response_size_bytes_count{handler="/v1/completions"}') == 2
    dur = 'http_request_duration_seconds_bucket{method="POST",handler="/v1/completions",le="0.5"}'
    assert line(text, dur) == 2


def test_bucket_constants_equal_the_reference() -> None:
    assert list(buckets.TIME_TO_FIRST_TOKEN) == REFERENCE_BUCKETS["time_to_first_token"]
    assert list(buckets.HTTP_DURATION) == REFERENCE_BUCKETS["http"]


def stats(**over: object) -> EngineStats:
    base: dict[str, object] = {
        "num_running": 0,
        "num_waiting": 0,
        "waiting_by_reason": {"capacity": 0, "deferred": 0},
        "kv_usage": 0.0,
        "num_gpu_blocks": 1000,
        "kv_cache_size_tokens": 16000,
        "preemptions": 0,
        "prompt_tokens": 0,
        "generation_tokens": 0,
        "prefix_cache_queries": 0,
        "prefix_cache_hits": 0,
        "rejections": {"max_num_queued_reqs": 0, "max_num_queued_tokens": 0},
        "request_success": {"length": 0, "stop": 0},
        "iteration_tokens": (),
    }
    base.update(over)
    return EngineStats(**base)  # type: ignore[arg-type]


def test_engine_counters_are_mirrored_as_increments_and_gauges_as_values() -> None:
    reg, m = make()
    m.on_stats(stats(num_running=3, num_waiting=2, kv_usage=0.5, prompt_tokens=100,
                     prefix_cache_hits=30, rejections={"max_num_queued_reqs": 2},
                     request_success={"length": 1}, iteration_tokens=(1, 300)))  # fmt: skip
    m.on_stats(stats(num_running=1, prompt_tokens=150, prefix_cache_hits=30,
                     rejections={"max_num_queued_reqs": 5}, request_success={"length": 4},
                     iteration_tokens=(9,)))  # fmt: skip
    text = reg.render()
    assert line(text, f"vllm:num_requests_running{{{ME}}}") == 1
    assert line(text, f"vllm:num_requests_waiting{{{ME}}}") == 0
    assert line(text, f"vllm:prompt_tokens_total{{{ME}}}") == 150
    assert line(text, f'vllm:prompt_tokens_by_source_total{{{ME},source="local_compute"}}') == 120
    assert line(text, f'vllm:prompt_tokens_by_source_total{{{ME},source="local_cache_hit"}}') == 30
    assert line(text, f"vllm:prompt_tokens_cached_total{{{ME}}}") == 30
    rejected = 'vllm:admission_rejections_total{model_name="m",reason="max_num_queued_reqs"}'
    assert line(text, rejected) == 5
    assert line(text, f'vllm:request_success_total{{{ME},finished_reason="length"}}') == 4
    assert line(text, f"vllm:iteration_tokens_total_count{{{ME}}}") == 3
    assert line(text, f"vllm:iteration_tokens_total_sum{{{ME}}}") == 310
    assert line(text, f'vllm:iteration_tokens_total_bucket{{{ME},le="8.0"}}') == 1


def test_request_histograms_follow_the_record() -> None:
    reg, m = make()
    req = SimRequest("r", arrival=10.0, prompt_tokens=100, max_tokens=4, n=1)
    record = RequestRecord(
        request_id="r",
        arrival=10.0,
        scheduled=10.5,
        first_token=10.7,
        finished=11.0,
        prompt_tokens=100,
        output_tokens=4,
        preemptions=1,
        finish_reason="length",
        token_times=(10.7, 10.8, 10.9, 11.0),
        queued=10.02,
        cached_tokens=32,
    )
    m.on_first_output(RequestEvent("r", 10.75, "tokens", 1, None), req)
    m.on_finished(record, req)
    m.on_request_done(req, 4)
    text = reg.render()

    def hist(name: str) -> tuple[float, float]:
        return line(text, f"{name}_count{{{ME}}}"), line(text, f"{name}_sum{{{ME}}}")

    assert hist("vllm:time_to_first_token_seconds") == pytest.approx((1, 0.75))
    assert hist("vllm:inter_token_latency_seconds") == pytest.approx((3, 0.3))
    assert hist("vllm:request_time_per_output_token_seconds") == pytest.approx((1, 0.1))
    assert hist("vllm:request_queue_time_seconds") == pytest.approx((1, 0.48))
    assert hist("vllm:request_prefill_time_seconds") == pytest.approx((1, 0.2))
    assert hist("vllm:request_decode_time_seconds") == pytest.approx((1, 0.3))
    assert hist("vllm:request_inference_time_seconds") == pytest.approx((1, 0.5))
    assert hist("vllm:e2e_request_latency_seconds") == pytest.approx((1, 1.0))
    assert hist("vllm:request_num_preemptions") == (1, 1)
    assert hist("vllm:request_prompt_tokens") == (1, 100)
    assert hist("vllm:request_generation_tokens") == (1, 4)
    assert hist("vllm:request_prefill_kv_computed_tokens") == (1, 68)
    assert hist("vllm:request_params_max_tokens") == (1, 4)
    assert hist("vllm:request_params_n") == (1, 1)
    assert hist("vllm:request_max_num_generation_tokens") == (1, 4)
