"""The A/B bench of two operator trees: its arm order, the API server's counters, the report."""

from __future__ import annotations

from typing import Any

from bench.operator_ab import arm_order, render_ab, summarize_ab
from bench.scale_probes import count_delta, parse_counts

METRICS = """\
# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1"} 2
apiserver_request_total{code="410",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 1
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="binding",verb="POST",version="v1"} 600
apiserver_request_total_other{verb="LIST",resource="pods"} 99
apiserver_watch_events_total{group="",resource="pods",version="v1"} 8403
apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 1.2e+07
"""  # noqa: E501 (the API server's own lines)


def test_counters_summed_over_codes_and_scopes_by_verb_and_resource() -> None:
    counts = parse_counts(METRICS)
    assert counts == {
        "LIST pods": 5.0,
        "WATCH pods": 1.0,
        "POST pods/binding": 600.0,
        "watch events pods": 8403.0,
    }


def test_delta_keeps_what_grew_including_new_keys() -> None:
    before = {"LIST pods": 5.0, "GET nodes": 7.0}
    after = {"LIST pods": 9.0, "GET nodes": 7.0, "WATCH pods": 2.0}
    assert count_delta(before, after) == {"LIST pods": 4, "WATCH pods": 2}


def test_each_tree_goes_first_in_every_other_pair() -> None:
    assert arm_order(1) == ["this", "other"]
    assert arm_order(3) == ["this", "other", "other", "this", "this", "other"]


def _run(tree: str, cpu: float, served: dict[str, int], lags: list[float]) -> dict[str, Any]:
    run: dict[str, Any] = {"tree": tree, "all_ready_s": 50.0, "apiserver_cpu_s": cpu}
    run.update(etcd_cpu_s=8.0, client_cpu_s=12.0, writes=9200, served=served, ready_lags=lags)
    return run


def test_summary_reports_only_the_counts_that_differ() -> None:
    runs = [
        _run("this", 40.0, {"LIST pods": 1, "GET vllmservices": 980}, [0.2] * 99 + [2.0]),
        _run("other", 42.0, {"LIST pods": 40, "GET vllmservices": 1000}, [0.3] * 100),
        _run("other", 38.0, {"LIST pods": 44, "GET vllmservices": 990}, [0.3] * 100),
        _run("this", 41.0, {"LIST pods": 1, "GET vllmservices": 990}, [0.2] * 100),
    ]
    summary = summarize_ab(runs)
    assert summary["figures"]["apiserver_cpu_s"]["this"] == {
        "median": 40.5,
        "min": 40.0,
        "max": 41.0,
    }
    assert summary["lags"]["ready_lags"]["other"] == {"p50": 0.3, "p99": 0.3}
    assert summary["served"] == {"LIST pods": {"this": 1, "other": 42}}  # GETs differ by 1 %
    meta = {"services": 2, "command": "python bench/operator_ab.py", "date": "d"}
    meta.update(order=["this", "other", "other", "this"], other="/tmp/main")
    text = render_ab(meta, summary)
    assert "| kube-apiserver CPU (CPU-s) | 40.5 (40.0-41.0) | 40.0 (38.0-42.0) |" in text
    assert "- LIST pods: 1 / 42" in text
