"""The registry renders the Prometheus text format the way prometheus_client (and so vLLM) does."""

from __future__ import annotations

import pytest

from vllm_twin.exposition import Registry, format_value, request_token_buckets


def test_small_registry_renders_exact_text() -> None:
    reg = Registry()
    c = reg.counter("vllm:num_preemptions", "Preemptions.", ["model_name", "engine"])
    g = reg.gauge("vllm:num_requests_running", "Running.", ["model_name", "engine"])
    h = reg.histogram("vllm:request_params_n", "n.", ["model_name", "engine"], [1, 2, 5])
    s = reg.summary("http_request_size_bytes", "Size.", ["handler"])
    c.inc(2, "m", "0")
    g.set(3, "m", "0")
    for v in (1, 1.5, 2, 7):
        h.observe(v, "m", "0")
    s.observe(120, "/v1/completions")
    assert reg.render() == (
        "# HELP vllm:num_preemptions_total Preemptions.\n"
        "# TYPE vllm:num_preemptions_total counter\n"
        'vllm:num_preemptions_total{model_name="m",engine="0"} 2.0\n'
        "# HELP vllm:num_requests_running Running.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="m",engine="0"} 3.0\n'
        "# HELP vllm:request_params_n n.\n"
        "# TYPE vllm:request_params_n histogram\n"
        'vllm:request_params_n_bucket{model_name="m",engine="0",le="1.0"} 1.0\n'
        'vllm:request_params_n_bucket{model_name="m",engine="0",le="2.0"} 3.0\n'
        'vllm:request_params_n_bucket{model_name="m",engine="0",le="5.0"} 3.0\n'
        'vllm:request_params_n_bucket{model_name="m",engine="0",le="+Inf"} 4.0\n'
        'vllm:request_params_n_count{model_name="m",engine="0"} 4.0\n'
        'vllm:request_params_n_sum{model_name="m",engine="0"} 11.5\n'
        "# HELP http_request_size_bytes Size.\n"
        "# TYPE http_request_size_bytes summary\n"
        'http_request_size_bytes_count{handler="/v1/completions"} 1.0\n'
        'http_request_size_bytes_sum{handler="/v1/completions"} 120.0\n'
    )


def test_family_without_children_renders_only_its_header() -> None:
    reg = Registry()
    reg.counter("http_requests", "Total.", ["method", "status", "handler"])
    assert reg.render() == "# HELP http_requests_total Total.\n# TYPE http_requests_total counter\n"


def test_touch_creates_zero_series_and_label_values_are_escaped() -> None:
    reg = Registry()
    c = reg.counter("x", "Help with \\ and\nnewline.", ["reason"])
    c.touch('a"b\\c\nd')
    text = reg.render()
    assert "# HELP x_total Help with \\\\ and\\nnewline.\n" in text
    assert 'x_total{reason="a\\"b\\\\c\\nd"} 0.0\n' in text


def test_counter_declared_with_total_suffix_is_refused() -> None:
    with pytest.raises(ValueError, match="without the _total suffix"):
        Registry().counter("vllm:prompt_tokens_total", "x")


def test_counters_only_go_up_and_kinds_are_enforced() -> None:
    reg = Registry()
    c = reg.counter("c", "c")
    with pytest.raises(ValueError):
        c.inc(-1)
    with pytest.raises(TypeError):
        c.set(1)
    with pytest.raises(TypeError):
        c.observe(1)
    with pytest.raises(ValueError, match="expected labels"):
        reg.gauge("g", "g", ["a"]).set(1)


def test_iteration_tokens_total_is_a_histogram_named_with_total() -> None:
    reg = Registry()
    h = reg.histogram("vllm:iteration_tokens_total", "Tokens per step.", [], [1, 8])
    h.observe(8)
    text = reg.render()
    assert "# TYPE vllm:iteration_tokens_total histogram\n" in text
    assert 'vllm:iteration_tokens_total_bucket{le="8.0"} 1.0\n' in text
    assert "vllm:iteration_tokens_total_count 1.0\n" in text
    assert "vllm:iteration_tokens_total_total" not in text


def test_le_is_inclusive_and_values_above_last_bound_land_in_inf() -> None:
    reg = Registry()
    h = reg.histogram("h", "h", [], [0.5, 1.0])
    for v in (0.5, 1.0, 1.0000001):
        h.observe(v)
    text = reg.render()
    assert 'h_bucket{le="0.5"} 1.0' in text
    assert 'h_bucket{le="1.0"} 2.0' in text
    assert 'h_bucket{le="+Inf"} 3.0' in text


def test_duplicate_names_and_unsorted_buckets_are_refused() -> None:
    reg = Registry()
    reg.gauge("g", "g")
    with pytest.raises(ValueError, match="twice"):
        reg.gauge("g", "g")
    with pytest.raises(ValueError, match="increasing"):
        reg.histogram("h", "h", [], [2, 1])


@pytest.mark.parametrize(
    ("value", "text"),
    [(0, "0.0"), (1, "1.0"), (0.25, "0.25"), (float("inf"), "+Inf"), (float("nan"), "NaN")],
)
def test_format_value(value: float, text: str) -> None:
    assert format_value(value) == text


def test_request_token_buckets_follow_the_1_2_5_series_up_to_max_model_len() -> None:
    # docs/vllm-0.33.md §3.3: for 32768 the series ends at 10000, 20000
    assert request_token_buckets(32768) == [
        1,
        2,
        5,
        10,
        20,
        50,
        100,
        200,
        500,
        1000,
        2000,
        5000,
        10000,
        20000,
    ]
    assert request_token_buckets(8192) == [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]
    assert request_token_buckets(5000)[-1] == 5000
