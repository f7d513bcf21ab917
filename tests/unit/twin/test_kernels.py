"""The kernels measured here (twin/calibration/measurements.yaml `kernels`) against the profiles:
their ceilings are the raw runs' figures, no shipped profile assumes more, and the parity sums."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_operator.sim.catalog import load_catalog
from vllm_operator.sim.engine.steptime import StepTimeModel
from vllm_twin.calibration.kernels import (
    ceilings_from_probe,
    overreach,
    step_overlap,
    step_parity,
)
from vllm_twin.calibration.measurements import (
    KernelCeilings,
    MeasurementError,
    default_path,
    load_measurements,
    parse_measurements,
)
from vllm_twin.commands.calibrate import _report_overreach, shipped_path

ROOT = Path(__file__).resolve().parents[3]


def test_each_ceiling_is_the_mean_of_the_raw_runs() -> None:
    for kernels in load_measurements().kernels:
        runs = json.loads((ROOT / kernels.raw).read_text())["runs"]
        assert len(runs) == kernels.runs
        assert kernels.ceilings.model_dump() == ceilings_from_probe(runs), kernels.id


def test_no_shipped_profile_assumes_more_than_its_kernels_measured() -> None:
    catalog = load_catalog()
    measured = load_measurements().kernels
    assert measured, "the H200 probe's figures are in the set"
    for kernels in measured:
        gpu = catalog.gpu(kernels.gpu_profile)
        assert overreach(kernels.ceilings, gpu, catalog.coefficients) == []
    assert _report_overreach(load_measurements(), shipped_path()) == 0


def _ceilings(**figures: float) -> KernelCeilings:
    base = dict.fromkeys(KernelCeilings.model_fields, 1000.0)
    return KernelCeilings(**{**base, **figures})


@settings(derandomize=True, max_examples=60, deadline=None)
@given(
    eta_w=st.floats(0.3, 1.0),
    eta_kv=st.floats(0.2, 1.0),
    mfu_decode=st.floats(0.05, 0.9),
    stream=st.floats(0.5, 5.0),
    kv=st.floats(0.5, 5.0),
    gemm=st.floats(100.0, 990.0),
)
def test_overreach_names_exactly_the_rates_beyond_the_chip(
    eta_w: float, eta_kv: float, mfu_decode: float, stream: float, kv: float, gemm: float
) -> None:
    catalog = load_catalog()
    gpu = dataclasses.replace(
        catalog.gpu("H200-141GB"), eta_w=eta_w, eta_kv=eta_kv, mfu_decode=mfu_decode
    )
    ceilings = _ceilings(weight_stream_tbps=stream, kv_read_tbps=kv, gemm_tflops=gemm)
    lines = overreach(ceilings, gpu, catalog.coefficients)
    expected = {
        "eta_w x bandwidth": eta_w * gpu.bandwidth_tbps > stream,
        "eta_kv x bandwidth": eta_kv * gpu.bandwidth_tbps > kv,
        "mfu_prefill x tflops": (gpu.mfu_prefill or 0) * gpu.tflops > gemm,
        "mfu_decode x tflops": mfu_decode * gpu.tflops > gemm,
    }
    assert {what for what, over in expected.items() if over} == {
        what for what in expected if any(f": {what} =" in line for line in lines)
    }
    assert all(line.startswith("H200-141GB: ") and "measured here" in line for line in lines)


def _probe(
    tokens: dict[int, float], heads: dict[int, float], attention_us: float
) -> dict[str, Any]:
    """One synthetic run of bench/device/gpu_probe.py: linear-stack ms by tokens, lm_head ms by
    rows, one attention time for every decode shape and prefill length."""
    return {
        "gemm_stack": {"rows": [{"tokens": m, "ms": ms} for m, ms in tokens.items()]},
        "lm_head": {"rows": [{"rows": r, "ms": ms} for r, ms in heads.items()]},
        "attn_decode": {
            "rows": [
                {"batch": b, "context": c, "us_per_layer": attention_us}
                for b in (1, 4, 512)
                for c in (1024,)
            ]
        },
        "attn_prefill": {"rows": [{"length": 2048, "us_per_layer": attention_us}]},
    }


def test_a_step_is_the_sum_of_its_kernels_beside_the_models_gpu_terms() -> None:
    catalog = load_catalog()
    gpu, model = catalog.gpu("H200-141GB"), catalog.model("Llama-3.1-8B")
    runs = [
        _probe({1: 4.0, 4: 4.2, 2048: 50.0}, {1: 0.3, 8: 0.5}, 10.0),
        _probe({1: 6.0, 4: 4.4, 2048: 52.0}, {1: 0.5, 8: 0.7}, 30.0),
    ]
    rows = {(r.kind, r.batch): r for r in step_parity(runs, gpu, model, catalog.coefficients)}
    # batch 512 has no linear-stack time: not composed; batch 4 takes the 8-row projection
    assert set(rows) == {("decode", 1), ("decode", 4), ("prefill", 1)}
    layers = model.layers
    assert rows[("decode", 1)].kernels_ms == pytest.approx(5.0 + 0.4 + layers * 20 / 1e3)
    assert rows[("decode", 4)].kernels_ms == pytest.approx(4.3 + 0.6 + layers * 20 / 1e3)
    assert rows[("prefill", 1)].kernels_ms == pytest.approx(51.0 + 0.4 + layers * 20 / 1e3)
    gpu_only = dataclasses.replace(catalog.coefficients, t0=0.0, c_layer=0.0, c_req=0.0)
    twin = StepTimeModel(
        gpu, model, tp=1, kv_bytes_per_token=model.kv_bytes_per_token, coeffs=gpu_only
    )
    assert rows[("decode", 4)].twin_ms == pytest.approx(twin.decode_duration(4, 4096) * 1e3)
    assert rows[("decode", 4)].ratio == rows[("decode", 4)].twin_ms / rows[("decode", 4)].kernels_ms


def _file_with_kernels(**changes: Any) -> dict[str, Any]:
    import yaml

    data = yaml.safe_load(default_path().read_text())
    entry = copy.deepcopy(data["kernels"][0])
    entry.update(changes)
    data["kernels"] = [entry]
    return data


@pytest.mark.parametrize(
    ("changes", "names"),
    [
        ({"provenance": "a blog"}, "kernels.0.provenance"),
        ({"date": "yesterday"}, "kernels.0.date"),
        ({"ceilings": {"copy_tbps": 4.2}}, "kernels.0.ceilings.read_tbps"),
        ({"ceilings": None}, "kernels.0.ceilings"),
    ],
)
def test_a_bad_kernels_entry_is_refused_in_one_line_naming_the_field(
    changes: dict[str, Any], names: str
) -> None:
    with pytest.raises(MeasurementError) as caught:
        parse_measurements(_file_with_kernels(**changes), origin="m.yaml")
    message = str(caught.value)
    assert message.startswith(f"m.yaml: {names}"), message
    assert "\n" not in message


def test_two_kernels_entries_with_one_id_are_refused() -> None:
    data = _file_with_kernels()
    data["kernels"] = data["kernels"] * 2
    with pytest.raises(MeasurementError, match="duplicate kernels id"):
        parse_measurements(data, origin="m.yaml")


def test_calibrate_fails_when_the_shipped_profile_outruns_the_chip(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = _file_with_kernels(ceilings={**_ceilings().model_dump(), "weight_stream_tbps": 1.0})
    measurements = parse_measurements(data)
    assert _report_overreach(measurements, shipped_path()) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "eta_w x bandwidth" in err[0] and "H200-141GB" in err[0]
    # another --out is not the catalog: not checked
    assert _report_overreach(measurements, Path("elsewhere.yaml")) == 0


def test_step_overlap_averages_the_runs_and_tells_adding_from_hiding() -> None:
    def run(linear: float, attention: float, step: float) -> dict[str, Any]:
        row = {"batch": 64, "context": 1024, "linear_ms": linear, "attention_ms": attention,
               "step_ms": step}  # fmt: skip
        return {"step_overlap": {"rows": [row]}}

    (row,) = step_overlap([run(4.0, 3.0, 7.0), run(4.0, 5.0, 9.0)])
    assert (row.linear_ms, row.attention_ms, row.step_ms) == (4.0, 4.0, 8.0)
    assert row.over_sum == 1.0 and row.over_max == 2.0  # they add: neither hides the other


def test_the_h200_step_is_the_sum_of_its_parts_not_the_larger() -> None:
    """What the committed overlap runs say (docs/twin-calibration.md §2.7): within 5% of the
    sum at every shape, so the step-wide roofline's max() undercounts where both are large."""
    (kernels,) = load_measurements().kernels
    assert kernels.overlap_raw is not None
    rows = step_overlap(json.loads((ROOT / kernels.overlap_raw).read_text())["runs"])
    assert len(rows) >= 5
    assert all(0.95 <= r.over_sum <= 1.05 for r in rows), rows
    assert max(r.over_max for r in rows) > 1.4
