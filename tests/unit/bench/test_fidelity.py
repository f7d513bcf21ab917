"""The fidelity benchmark reports the error a known simulation has, on a two-point sample."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bench.fidelity import evaluate, main, summarize

from vllm_operator.sim.catalog import load_catalog
from vllm_twin.calibration.measurements import parse_measurements
from vllm_twin.calibration.replay import replay_point

from ..twin.measurement_source import one_point


def _set(measured: dict[str, Any]) -> dict[str, Any]:
    return one_point(measured)


def test_a_point_off_by_a_known_factor_reports_that_error() -> None:
    catalog = load_catalog()
    probe = parse_measurements(_set({"ttft_ms": {"median": 1.0}})).points[0]
    sim = replay_point(probe, catalog).figures
    # the "measurement" is the twin's own figure times 1.25 (TTFT) and 0.8 (throughput)
    measured = {
        "ttft_ms": {"median": sim.ttft_ms.median * 1.25},
        "request_throughput_rps": sim.request_throughput * 0.8,
    }
    outcome = evaluate(parse_measurements(_set(measured)), catalog)
    errors = {r.quantity: r.error for r in outcome.rows}
    assert errors == {
        "ttft_ms.median": pytest.approx(1 / 1.25 - 1),
        "request_throughput_rps": pytest.approx(1 / 0.8 - 1),
    }
    summary = summarize(outcome.rows)["fit"]
    assert summary["TTFT"]["median_abs_error"] == pytest.approx(0.2)
    assert summary["throughput"]["worst_abs_error"] == pytest.approx(0.25)
    assert summary["all"]["count"] == 2


def test_a_point_without_a_profile_is_listed_not_simulated() -> None:
    data = _set({"ttft_ms": {"median": 10.0}})
    data["sources"][0]["setup"]["gpu_profile"] = None
    outcome = evaluate(parse_measurements(data), load_catalog())
    assert outcome.rows == () and outcome.skipped[0][0] == "s/c"


def test_the_command_writes_json_markdown_and_the_plot(tmp_path: Path) -> None:
    assert main(["--only", "wmx-l4-qwen2.5-0.5b/concurrency-32", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "fidelity.json").read_text())
    assert {r["point"] for r in data["rows"]} == {"wmx-l4-qwen2.5-0.5b/concurrency-32"}
    assert "| fit | TTFT |" in (tmp_path / "fidelity.md").read_text()
    assert (tmp_path / "fidelity.png").stat().st_size > 0


def test_an_excluded_quantity_is_neither_compared_nor_fitted_and_is_printed(
    tmp_path: Path,
) -> None:
    data = _set({"ttft_ms": {"median": 10.0}, "request_throughput_rps": 1.0})
    why = "below the compute floor of the load the page states"
    data["sources"][0]["points"][0]["excluded"] = {"ttft_ms": why}
    outcome = evaluate(parse_measurements(data), load_catalog())
    assert {r.quantity for r in outcome.rows} == {"request_throughput_rps"}
    assert outcome.excluded == (("s/c", "ttft_ms", why),)


def test_the_shipped_set_prints_its_exclusions(tmp_path: Path) -> None:
    only = "databasemart-a40-50-concurrent/llama-3.1-8b-instruct"
    assert main(["--only", only, "--out", str(tmp_path)]) == 0
    text = (tmp_path / "fidelity.md").read_text()
    assert f"- {only} ttft_ms: Below the A40's compute floor" in text
    data = json.loads((tmp_path / "fidelity.json").read_text())
    assert "ttft_ms.median" not in {r["quantity"] for r in data["rows"]}
