"""The operator scale report: ratios per neighbouring pair of runs, with their spread."""

from __future__ import annotations

from typing import Any

from bench.scale_report import pair_ratios, render_markdown, summarize


def _run(arm: str, ready: float, lags: list[float] | None = None) -> dict[str, Any]:
    run: dict[str, Any] = {"arm": arm, "all_ready_s": ready, "writes": 100 if arm == "raw" else 110}
    run.update(creation_span_s=ready / 2, apiserver_cpu_s=10.0, etcd_cpu_s=2.0, client_cpu_s=1.0)
    run["client_rss_mib"] = None if arm == "raw" else 120.0
    run["ready_lags"] = lags or []
    return run


def test_each_operator_run_is_divided_by_the_raw_run_beside_it() -> None:
    runs = [_run("raw", 20), _run("operator", 30), _run("operator", 44), _run("raw", 22)]
    assert pair_ratios(runs, "all_ready_s") == [1.5, 2.0]
    assert pair_ratios(runs, "client_rss_mib") == []  # no raw figure: no ratio


def test_summary_spread_lag_percentiles_and_table() -> None:
    runs = [_run("raw", 20), _run("operator", 30, [0.1] * 99 + [3.0]), _run("raw", 40)]
    runs.append(_run("operator", 40, [0.2] * 100))
    summary = summarize(runs)
    assert summary["all_ready_s"]["ratio"] == {"median": 1.25, "min": 1.0, "max": 1.5}
    assert summary["writes"]["ratio"]["median"] == 1.1
    assert summary["client_rss_mib"]["raw"] is None
    assert summary["ready_lags"]["p50"] in (0.1, 0.2) and summary["ready_lags"]["max"] == 3.0
    meta = {"services": 2, "command": "python bench/operator_scale.py", "date": "d", "runs": 2}
    meta.update(concurrency=8, workload="w", idle={"writes": 0, "seconds": 30, "resync": 15})
    text = render_markdown(meta, summary)
    assert "| time to all Ready (from the first apply) (s) | 30.0 (20.0-40.0) |" in text
    assert "1.25 (1.00-1.50)x" in text and "0 writes in 30 s" in text
