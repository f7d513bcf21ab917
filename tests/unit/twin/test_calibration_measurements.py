"""The measurement set (twin/calibration/measurements.yaml): coverage, split and schema checks."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from vllm_operator.sim.catalog import load_catalog
from vllm_twin.calibration.measurements import (
    MeasurementError,
    check_profiles,
    default_path,
    load_measurements,
    parse_measurements,
    summarize,
    without_profile,
)

README = default_path().parent / "README.md"


def test_the_shipped_set_covers_enough_gpus_models_and_held_out_points() -> None:
    coverage = summarize(load_measurements())
    assert coverage.points >= 40
    assert len(coverage.gpu_types) >= 4
    assert len(coverage.models) >= 3
    assert coverage.heldout_share >= 0.30


def test_every_point_names_its_source_and_split() -> None:
    for point in load_measurements().points:
        assert point.source.url.startswith(("http://", "https://")), point.id
        assert point.split in ("fit", "heldout"), point.id


def test_no_page_is_cited_by_both_splits() -> None:
    # Whole sources are held out: two entries for one page must not straddle the split.
    splits: dict[str, set[str]] = {}
    for source in load_measurements().sources:
        splits.setdefault(source.url, set()).add(source.split)
    assert {url: s for url, s in splits.items() if len(s) > 1} == {}


# held out whole as unseen hardware: their profiles are datasheet figures, fitted to nothing
UNSEEN_GPU_TYPES = {"A40", "RTX4090"}


def test_every_gpu_type_with_a_twin_profile_keeps_fit_points() -> None:
    measurements = load_measurements()
    profiled = {p.setup.gpu_type for p in measurements.points if p.setup.gpu_profile is not None}
    assert profiled - UNSEEN_GPU_TYPES <= set(summarize(measurements).fit_gpu_types)
    assert not UNSEEN_GPU_TYPES & set(summarize(measurements).fit_gpu_types)


def test_profile_names_are_the_twins_own() -> None:
    catalog = load_catalog()
    assert check_profiles(load_measurements(), catalog.gpus, catalog.models) == []


def test_check_profiles_names_an_unknown_profile() -> None:
    errors = check_profiles(load_measurements(), gpu_profiles=["H100-80GB"], model_profiles=[])
    assert any("setup.gpu_profile 'L4' is not a twin GPU profile" in e for e in errors)
    assert any("setup.model_profile 'Llama-3.1-8B'" in e for e in errors)


def test_the_readme_lists_every_gpu_and_model_without_a_profile() -> None:
    text = README.read_text("utf-8")
    gpus, models = without_profile(load_measurements())
    assert models  # Llama 3.1 405B FP8: its checkpoint is not named
    assert [name for name in (*gpus, *models) if name not in text] == []


def test_the_readmes_counts_are_the_files() -> None:
    text = README.read_text("utf-8")
    measurements = load_measurements()
    coverage = summarize(measurements)
    by_split = {
        split: sum(1 for s in measurements.sources if s.split == split)
        for split in ("fit", "heldout")
    }
    assert f"{coverage.points} points from {len(measurements.sources)} sources" in text
    assert f"{len(coverage.models)} models" in text
    assert f"| fit | {by_split['fit']} | {coverage.fit_points} |" in text
    share = round(100 * coverage.heldout_share)
    assert f"| heldout | {by_split['heldout']} | {coverage.heldout_points} ({share}%) |" in text


def test_the_readme_has_a_line_for_every_source() -> None:
    text = README.read_text("utf-8")
    assert [s.id for s in load_measurements().sources if f"`{s.id}`" not in text] == []


def _minimal() -> dict[str, Any]:
    return {
        "schema_version": 1,
        "sources": [
            {
                "id": "s",
                "split": "fit",
                "title": "t",
                "url": "https://example.org/run",
                "kind": "blog",
                "tool": "vllm bench serve",
                "setup": {
                    "vllm_version": "0.11.0",
                    "gpu": "NVIDIA H100 SXM",
                    "gpu_type": "H100",
                    "gpu_profile": "H100-80GB",
                    "gpu_count": 1,
                    "tensor_parallel_size": 1,
                    "model": "meta-llama/Llama-3.1-8B-Instruct",
                    "dtype": "bf16",
                    "quantization": "none",
                    "prefix_caching": "off",
                },
                "workload": {
                    "mode": "serve",
                    "dataset": "random",
                    "input_len": 1024,
                    "output_len": 128,
                    "num_prompts": 100,
                    "request_rate": "inf",
                    "max_concurrency": 8,
                },
                "points": [{"id": "c8", "measured": {"ttft_ms": {"mean": 40.0}}}],
            }
        ],
    }


def test_a_point_overrides_its_sources_defaults_field_by_field() -> None:
    data = _minimal()
    data["sources"][0]["points"].append(
        {
            "id": "c32",
            "workload": {"max_concurrency": 32},
            "measured": {"output_throughput_tps": 9.0},
        }
    )
    c8, c32 = parse_measurements(data).points
    assert (c8.id, c8.workload.max_concurrency) == ("s/c8", 8)
    assert (c32.workload.max_concurrency, c32.workload.num_prompts) == (32, 100)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.update(split="test"), "sources.0.split: Input should be 'fit' or 'heldout'"),
        (
            lambda s: s["setup"].update(tensor_parallel_size=2),
            "s/c8: setup: Value error, tensor_parallel_size 2 is more than gpu_count 1",
        ),
        (
            lambda s: s["workload"].pop("max_concurrency"),
            "s/c8: workload: Value error, mode serve needs max_concurrency",
        ),
        (
            lambda s: s["points"].append(copy.deepcopy(s["points"][0])),
            "duplicate point id in source s: c8",
        ),
        (
            lambda s: s["points"][0].update(measured={"completed": 3}),
            "give at least one measured throughput or latency",
        ),
        (
            lambda s: s["points"][0]["measured"].update(ttft_ms={"mean": -1.0}),
            "ttft_ms.mean: Input should be greater than 0",
        ),
        (lambda s: s["setup"].pop("vllm_version"), "s/c8: setup.vllm_version: Field required"),
        (
            lambda s: s["points"][0].update(excluded={"tpot_ms": "not measured on this page"}),
            "excluded.tpot_ms: not a measured quantity of this point",
        ),
        (
            lambda s: s["points"][0].update(excluded={"ttft_ms": "odd"}),
            "excluded.ttft_ms: give the source-based reason in words",
        ),
    ],
)
def test_bad_entries_are_refused_with_the_field_named(edit: Any, message: str) -> None:
    data = _minimal()
    edit(data["sources"][0])
    with pytest.raises(MeasurementError) as info:
        parse_measurements(data, origin="m.yaml")
    assert message in str(info.value)
    assert str(info.value).startswith("m.yaml: ")
    assert "\n" not in str(info.value)


def test_a_missing_file_is_one_line_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(MeasurementError, match=r"nope\.yaml: cannot read: "):
        load_measurements(missing)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\xff\xfe", r"m\.yaml: not UTF-8 text$"),
        (b"a: [1\nb: 2\n", r"m\.yaml: not valid YAML: line 2, column 2: expected ','"),
    ],
)
def test_a_file_that_is_not_yaml_text_is_one_line(tmp_path: Path, data: bytes, says: str) -> None:
    path = tmp_path / "m.yaml"
    path.write_bytes(data)
    with pytest.raises(MeasurementError, match=says) as caught:
        load_measurements(path)
    assert "\n" not in str(caught.value)


def test_a_file_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n", "utf-8")
    with pytest.raises(MeasurementError, match="expected a mapping"):
        load_measurements(path)
