"""The shipped profiles against docs/twin-calibration.md §2.4, and the profile loader.

§2.4's figures are estimates from the same roofline, so these tests check that our data and
formulae reproduce them within a stated tolerance; they are not a fidelity claim. The table
assumes gpu_memory_utilization 0.9, hence the explicit setting here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from vllm_operator.sim.catalog import load_catalog
from vllm_operator.sim.engine import EngineConfig, StepCoefficients, StepTimeModel, resolve_config
from vllm_operator.sim.engine.profiles import GpuProfile, ProfileError, prefill_mfu

from .helpers import CATALOG

TOLERANCE = 0.25

# profile, model, max_model_len, KV capacity (tokens), ITL1 (s), dITL per seq at 1k ctx (s)
TABLE_2_4 = [
    ("H100-80GB", "Llama-3.1-8B", None, 446e3, 7.7e-3, 0.08e-3),
    ("H200-141GB", "Llama-3.1-8B", None, 890e3, 5.7e-3, 0.06e-3),
    ("A100-80GB", "Llama-3.1-8B", None, 443e3, 11.9e-3, 0.13e-3),
    ("A100-40GB", "Llama-3.1-8B", None, 149e3, 15e-3, 0.17e-3),
    ("L40S", "Llama-3.1-8B", None, 186e3, 26e-3, 0.25e-3),
    ("L4", "Llama-3.1-8B", 8192, 21e3, 74e-3, 0.86e-3),
    ("L4", "Llama-3.2-3B", 32768, 113e3, 30e-3, 0.75e-3),
    ("T4", "Llama-3.2-3B", 32768, 50e3, 28e-3, 0.70e-3),
]


def _timer(gpu: str, model: str, kv_bytes: int) -> StepTimeModel:
    return StepTimeModel(
        CATALOG.gpu(gpu),
        CATALOG.model(model),
        tp=1,
        kv_bytes_per_token=kv_bytes,
        coeffs=StepCoefficients(),
    )


@pytest.mark.parametrize(("gpu", "model", "mml", "kv_tokens", "itl1", "ditl"), TABLE_2_4)
def test_profiles_reproduce_calibration_table(
    gpu: str, model: str, mml: int | None, kv_tokens: float, itl1: float, ditl: float
) -> None:
    cfg = EngineConfig(gpu_memory_utilization=0.9, max_model_len=mml)
    res = resolve_config(cfg, CATALOG.gpu(gpu), CATALOG.model(model))
    assert res.kv_cache_size_tokens == pytest.approx(kv_tokens, rel=TOLERANCE)
    timer = _timer(gpu, model, res.kv_bytes_per_token)
    assert timer.decode_duration(1, 1) == pytest.approx(itl1, rel=TOLERANCE)
    # one more running sequence with a 1k context: its KV read and its per-request overhead
    extra = timer.decode_duration(2, 2048) - timer.decode_duration(1, 1024)
    assert extra == pytest.approx(ditl, rel=0.35)


def test_h100_prefill_throughput_in_calibrated_range() -> None:
    timer = _timer("H100-80GB", "Llama-3.1-8B", 131072)
    chunk = 8192
    seconds = timer.duration(1, chunk, 0, chunk, chunk * (chunk + 1), 0)
    # §2.4: ~22k tokens/s with the calibrated mfu_prefill (§2.5); 30k with BLIS's 0.45
    assert 18e3 <= chunk / seconds <= 45e3


def test_step_time_grows_with_batch_and_context() -> None:
    timer = _timer("H100-80GB", "Llama-3.1-8B", 131072)
    assert timer.decode_duration(64, 64 * 1000) > timer.decode_duration(8, 8 * 1000)
    assert timer.decode_duration(8, 8 * 8000) > timer.decode_duration(8, 8 * 1000)
    # decode_step is the same arithmetic, bit for bit (the engine's two paths rely on it)
    step = timer.decode_step(37)
    assert step(12345) == timer.duration(37, 0, 37, 12345, 0, 2 * 12345)


def test_tensor_parallel_splits_weights_and_adds_communication() -> None:
    gpu, model = CATALOG.gpu("H100-80GB"), CATALOG.model("Llama-3.1-70B")
    coeffs = StepCoefficients()
    tp2 = StepTimeModel(gpu, model, tp=2, kv_bytes_per_token=163840, coeffs=coeffs)
    tp4 = StepTimeModel(gpu, model, tp=4, kv_bytes_per_token=81920, coeffs=coeffs)
    # 141 GB of weights over 2 or 4 GPUs at ~2.4 TB/s effective, plus 160 all-reduces
    assert 0.030 < tp2.decode_duration(1, 1) < 0.050
    assert tp4.decode_duration(1, 1) < tp2.decode_duration(1, 1)


def test_catalog_lookup_and_errors() -> None:
    assert CATALOG.model("meta-llama/Llama-3.1-8B-Instruct").name == "Llama-3.1-8B"
    with pytest.raises(KeyError, match="unknown GPU 'B300'; known: H100-80GB, H200-141GB"):
        CATALOG.gpu("B300")
    assert list(CATALOG.gpus) == [
        "H100-80GB",
        "H200-141GB",
        "A100-80GB",
        "A100-40GB",
        "L40S",
        "L4",
        "T4",
        "MI300X",
        "A40",
        "RTX4090",
    ]


def test_user_override_merges_fields_and_adds_entries(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(
        "gpus:\n  H100-80GB: {mfu_prefill: 0.5}\n"
        "models:\n  Tiny-1B:\n    params: 1.0e+9\n    params_nonemb: 1.0e+9\n    layers: 16\n"
        "    hidden: 2048\n    heads: 16\n    kv_heads: 4\n    head_dim: 128\n    vocab: 32000\n"
        "    dtype_bytes: 2\n    weight_bytes: 2000000000\n    kv_bytes_per_token: 32768\n"
        "    max_model_len: 4096\n    activation_gib: 1.0\n"
        "coefficients: {api_overhead: 0.01}\n"
    )
    catalog = load_catalog(path)
    assert catalog.gpu("H100-80GB").mfu_prefill == 0.5
    assert catalog.gpu("H100-80GB").bandwidth_tbps == 3.35  # untouched fields stay
    assert catalog.model("Tiny-1B").layers == 16
    assert catalog.coefficients.api_overhead == 0.01


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("models:\n  Llama-3.1-8B: {kv_bytes_per_token: 1}\n", "does not match"),
        ("gpus:\n  H100-80GB: {colour: green}\n", "unknown field"),
        ("gpus:\n  H100-80GB: {mfu_decode: 3}\n", "fraction of peak"),
        ("gpus:\n  New: {memory_gib: 8}\n", "missing field"),
        ("engines: {}\n", "unknown top-level key"),
        ("coefficients: {t0: -1}\n", "must be a number >= 0"),
        # shares the step time divides by: 0 is a division by zero, more than 1 beyond the peak
        ("coefficients: {mfu_prefill: 0}\n", "coefficient mfu_prefill is a share"),
        ("coefficients: {mfu_prefill_max: 0}\n", "coefficient mfu_prefill_max is a share"),
        ("coefficients: {eta_kv: 1.5}\n", "coefficient eta_kv is a share"),
        # NaN passes every range check and inf overflows: neither may come in
        ("coefficients:\n  nontorch_gib_tp1: .inf\n", "coefficients.nontorch_gib_tp1 must be"),
        ("gpus:\n  H100-80GB: {mfu_decode: .nan}\n", "gpus.H100-80GB.mfu_decode must be a finite"),
        ("a: [1\nb: 2\n", r"^\S*bad.yaml: not valid YAML: line 2, column 2: expected ','"),
    ],
)
def test_user_override_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError, match=message):
        load_catalog(path)


def test_a_gpu_without_efficiencies_takes_the_pooled_coefficients() -> None:
    catalog = load_catalog()
    rtx = catalog.gpu("RTX4090")
    assert rtx.mfu_prefill is None and rtx.mfu_decode is None
    model, coeffs = catalog.model("Mistral-7B-v0.3"), catalog.coefficients
    kv = model.kv_bytes_per_token
    pooled = StepTimeModel(rtx, model, tp=1, kv_bytes_per_token=kv, coeffs=coeffs)
    assert rtx.tdp_watts is not None and coeffs.prefill_tflops_per_watt > 0
    sustained = coeffs.prefill_tflops_per_watt * rtx.tdp_watts / rtx.tflops
    prefill = min(coeffs.mfu_prefill_max, sustained)
    own = dataclasses.replace(rtx, mfu_prefill=prefill, mfu_decode=coeffs.mfu_decode)
    stated = StepTimeModel(own, model, tp=1, kv_bytes_per_token=kv, coeffs=coeffs)
    # a 2048-token prefill is compute-bound, a 256-sequence decode close to it
    for args in ((1, 2048, 0, 2048, 2048 * 2049, 0), (256, 0, 256, 256 * 300, 0, 2 * 256 * 300)):
        assert pooled.duration(*args) == stated.duration(*args)


@pytest.mark.parametrize(
    ("tdp", "per_watt", "expected"),
    [
        (None, 0.6, 0.44),  # no TDP: the median share
        (300.0, 0.0, 0.44),  # no per-watt figure (an uncalibrated catalog): the median share
        (100.0, 0.5, 0.25),  # 0.5 TFLOPS/W x 100 W of a 200-TFLOPS part
        (1000.0, 0.5, 0.8),  # 2.5 by power: the best measured share caps it
    ],
)
def test_prefill_efficiency_of_an_unmeasured_gpu_follows_its_power_limit(
    tdp: float | None, per_watt: float, expected: float
) -> None:
    gpu = GpuProfile("X", "X", 40.0, 1.0, 200.0, 25.0, 20.0, tdp_watts=tdp)
    coeffs = StepCoefficients(
        mfu_prefill=0.44, prefill_tflops_per_watt=per_watt, mfu_prefill_max=0.8
    )
    assert prefill_mfu(gpu, coeffs) == pytest.approx(expected)
    assert prefill_mfu(dataclasses.replace(gpu, mfu_prefill=0.3), coeffs) == 0.3


def test_a_profiles_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ProfileError, match=r"b\.yaml: not UTF-8 text$"):
        load_catalog(path)
