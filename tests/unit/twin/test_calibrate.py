"""`vllm-twin calibrate`: the search, the prior, the fit on a tiny set and the --check mode."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from vllm_operator.sim.catalog import load_catalog
from vllm_operator.sim.engine import GpuProfile
from vllm_twin.calibration.fit import (
    PRIOR_WEIGHT,
    fit,
    golden,
    leave_one_out,
    loss,
    pooled,
    prior_cost,
)
from vllm_twin.calibration.measurements import default_path, parse_measurements
from vllm_twin.calibration.replay import replay_point
from vllm_twin.cli import main
from vllm_twin.commands.calibrate import fingerprint, shipped_path

from .measurement_source import one_point


def test_golden_section_finds_the_minimum_on_linear_and_log_scales() -> None:
    assert golden(lambda x: (x - 0.3) ** 2, 0.0, 1.0, False, 30) == pytest.approx(0.3, abs=1e-4)
    found = golden(lambda x: math.log(x / 0.02) ** 2, 0.001, 1.0, True, 30)
    assert found == pytest.approx(0.02, rel=1e-3)


def test_the_prior_costs_distance_from_the_hand_value() -> None:
    assert prior_cost(0.45, 0.45, 0.1, 0.9, True) == 0.0
    assert prior_cost(0.9, 0.45, 0.1, 0.9, True) == pytest.approx(PRIOR_WEIGHT * math.log(2))
    assert prior_cost(0.02, 0.0, 0.0, 0.04, False) == pytest.approx(PRIOR_WEIGHT / 2)


L4_SETUP = {
    "gpu": "NVIDIA L4",
    "gpu_type": "L4",
    "gpu_profile": "L4",
    "model": "Qwen/Qwen2.5-0.5B-Instruct",
    "model_profile": "Qwen2.5-0.5B",
}


def _one_point(measured: dict[str, Any], split: str = "fit") -> dict[str, Any]:
    workload = {"input_len": 64, "num_prompts": 4, "max_concurrency": 1}
    return one_point(measured, split=split, setup=L4_SETUP, workload=workload)


def test_a_fit_moves_towards_a_point_the_twin_misses_and_ignores_held_out_points() -> None:
    catalog = load_catalog(calibrated=False)
    probe = parse_measurements(_one_point({"itl_ms": {"median": 1.0}})).points[0]
    itl = replay_point(probe, catalog).figures.itl_ms.median
    # decode 30% slower than the twin's: a fit must lower the L4's effective bandwidth
    slower = _one_point({"itl_ms": {"median": itl * 1.3}})
    fitted = fit(parse_measurements(slower), catalog, rounds=1, evals=6)
    assert fitted.points == 1 and fitted.loss_after < fitted.loss_before
    assert fitted.gpus["L4"]["eta_w"] < 1 / 1.3625
    held_out = fit(parse_measurements(_one_point({"itl_ms": {"median": 9.0}}, "heldout")), catalog)
    assert held_out.points == 0 and held_out.gpus == {}


def test_loss_is_zero_when_the_twin_matches_exactly() -> None:
    catalog = load_catalog()
    probe = parse_measurements(_one_point({"itl_ms": {"median": 1.0}})).points[0]
    itl = replay_point(probe, catalog).figures.itl_ms.median
    exact = parse_measurements(_one_point({"itl_ms": {"median": itl}})).points
    assert loss(exact, catalog) == pytest.approx(0.0, abs=1e-12)


def test_check_passes_on_the_shipped_file_and_fails_on_a_stale_one(tmp_path: Path) -> None:
    assert main(["calibrate", "--check"]) == 0
    stale = tmp_path / "calibrated.yaml"
    data = yaml.safe_load(shipped_path().read_text("utf-8"))
    stale.write_text(yaml.safe_dump({**data, "fingerprint": "0" * 64}), "utf-8")
    assert main(["calibrate", "--check", "--out", str(stale)]) == 1


def test_the_fingerprint_follows_what_the_fit_reads_of_the_measurement_file(
    tmp_path: Path,
) -> None:
    copy = tmp_path / "m.yaml"
    text = default_path().read_text("utf-8")
    copy.write_text(text, "utf-8")
    assert fingerprint(copy) == fingerprint(default_path())
    # a comment, or the kernels measured here (never fitted), leave the fit as it is
    data = yaml.safe_load(text)
    data["kernels"][0]["ceilings"]["copy_tbps"] = 1.0
    copy.write_text("# another line\n" + yaml.safe_dump(data), "utf-8")
    assert fingerprint(copy) == fingerprint(default_path())
    # a figure of a source is what the fit reads
    data["sources"][0]["points"][0]["measured"]["duration_s"] = 1.0
    copy.write_text(yaml.safe_dump(data), "utf-8")
    assert fingerprint(copy) != fingerprint(default_path())


def _gpu(name: str, tflops: float, tdp: float | None) -> GpuProfile:
    return GpuProfile(name, name, 80.0, 2.0, tflops, 100.0, 10.0, tdp_watts=tdp)


def test_an_unseen_gpu_takes_the_fitted_gpus_median_efficiencies_and_prefill_per_watt() -> None:
    fitted = {
        "A": {"mfu_prefill": 0.2, "mfu_decode": 0.08, "eta_w": 0.7, "eta_kv": 0.5},
        "B": {"mfu_prefill": 0.4, "mfu_decode": 0.30, "eta_w": 0.6, "eta_kv": 0.5},
        "C": {"mfu_prefill": 0.6, "mfu_decode": 0.32, "eta_w": 0.8, "eta_kv": 0.5},
    }
    # 0.2 x 1000 / 400 = 0.5, 0.4 x 500 / 400 = 0.5, 0.6 x 300 / 200 = 0.9 TFLOPS per watt
    profiles = {"A": _gpu("A", 1000, 400), "B": _gpu("B", 500, 400), "C": _gpu("C", 300, 200)}
    assert pooled(fitted, profiles) == {
        "mfu_prefill": 0.4,
        "mfu_decode": 0.30,
        "prefill_tflops_per_watt": 0.5,
        "mfu_prefill_max": 0.6,
    }
    # without a TDP there is no per-watt figure: the medians alone
    no_tdp = {n: _gpu(n, g.tflops, None) for n, g in profiles.items()}
    assert pooled(fitted, no_tdp) == {"mfu_prefill": 0.4, "mfu_decode": 0.30}
    assert pooled({}, profiles) == {}


def test_leave_one_out_prices_each_fitted_gpu_from_the_others() -> None:
    fitted = {n: {"mfu_prefill": v} for n, v in (("A", 0.2), ("B", 0.4), ("C", 0.6))}
    fitted = {n: {**f, "mfu_decode": 0.3} for n, f in fitted.items()}
    profiles = {"A": _gpu("A", 1000, 400), "B": _gpu("B", 500, 400), "C": _gpu("C", 300, 200)}
    checks = {c.gpu: c for c in leave_one_out(fitted, profiles)}
    # A from B and C: median 0.7 TFLOPS/W x 400 W / 1000 TFLOPS = 0.28; median share 0.5
    assert checks["A"].by_power == pytest.approx(0.28) and checks["A"].by_median == 0.5
    # C from A and B: 0.5 x 200 / 300 = 0.333, under the best other share (0.4)
    assert checks["C"].by_power == pytest.approx(1 / 3) and checks["C"].fitted == 0.6
    # B from A and C: 0.7 x 400 / 500 = 0.56, capped at the best other share (0.6): 0.56
    assert checks["B"].by_power == pytest.approx(0.56)
