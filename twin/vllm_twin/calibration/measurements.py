"""The measurement set: public, measured vLLM results, each with its source and its split.

The data lives in the source tree beside the package, at twin/calibration/measurements.yaml (schema
and sources: twin/calibration/README.md). It is input to calibration and to the fidelity
benchmark, which run from a checkout, so the wheel does not carry it: `default_path()` finds it
relative to this file, and every reader takes a path to read another copy.

A source's `setup` and `workload` are the defaults of its points; a point overrides them field by
field. `parse_measurements` merges them and validates the result, so every `Point` carries the
whole setup it was measured under.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Self, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    model_validator,
)

from vllm_operator.yamlfile import YamlFileError, read_yaml_file

M = TypeVar("M", bound=BaseModel)
Unknown = Literal["unknown"]
Split = Literal["fit", "heldout"]
# A length is a token count, "sharegpt" (each prompt's own lengths from the dataset) or unknown.
Length = PositiveInt | Literal["sharegpt", "unknown"]


class MeasurementError(ValueError):
    """The measurement file is missing, not YAML or off the schema; one line naming the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Stats(_Strict):
    """A distribution as the source gives it; only the statistics it reports are set."""

    mean: PositiveFloat | None = None
    median: PositiveFloat | None = None
    p90: PositiveFloat | None = None
    p95: PositiveFloat | None = None
    p99: PositiveFloat | None = None

    @model_validator(mode="after")
    def _some(self) -> Self:
        if not self.model_fields_set:
            raise ValueError("give at least one of mean, median, p90, p95, p99")
        return self


class Setup(_Strict):
    """What served the requests. `gpu` and `model` are the source's words; the profiles are the
    twin's names (operator/vllm_operator/sim/profiles/), None where the twin has none yet and
    "unknown" where the source does not say enough to choose one."""

    vllm_version: str
    gpu: str
    gpu_type: str
    gpu_profile: str | None = None
    gpu_profile_basis: str | None = None
    gpu_count: PositiveInt | Unknown
    tensor_parallel_size: PositiveInt | Unknown
    model: str
    model_profile: str | None = None
    model_profile_basis: str | None = None
    dtype: str
    quantization: str
    prefix_caching: Literal["on", "off", "default", "unknown"]
    server_args: str | None = None
    # the default budget tier the run's vLLM build gave its device, where that is not the one
    # vLLM 0.33 gives it (docs/vllm-0.33.md §1.3): large 16384/1024, medium 8192/1024, small
    # 2048/256 tokens/sequences for `vllm serve`
    scheduler_budget: Literal["large", "medium", "small"] | None = None

    @model_validator(mode="after")
    def _tp_fits(self) -> Self:
        tp, count = self.tensor_parallel_size, self.gpu_count
        if isinstance(tp, int) and isinstance(count, int) and tp > count:
            raise ValueError(f"tensor_parallel_size {tp} is more than gpu_count {count}")
        return self


# What each mode needs to be reproduced: a server run needs its load, an offline latency run its
# batch, an offline throughput run its prompt count.
_REQUIRED_BY_MODE = {
    "serve": ("num_prompts", "max_concurrency", "request_rate"),
    "offline-latency": ("batch_size",),
    "offline-throughput": ("num_prompts",),
}


class Workload(_Strict):
    """The load: `serve` is `vllm bench serve` (or benchmark_serving.py) against a server;
    `offline-latency` / `offline-throughput` are vLLM's offline engine benchmarks."""

    mode: Literal["serve", "offline-latency", "offline-throughput"]
    dataset: Literal["sharegpt", "random", "fixed", "unknown"]
    input_len: Length
    output_len: Length
    num_prompts: PositiveInt | Unknown | None = None
    max_concurrency: PositiveInt | Literal["unlimited", "unknown"] | None = None
    request_rate: PositiveFloat | Literal["inf", "unknown"] | None = None
    batch_size: PositiveInt | None = None
    ignore_eos: bool | Unknown | None = None
    seed: int | None = None

    @model_validator(mode="after")
    def _complete_for_mode(self) -> Self:
        missing = [f for f in _REQUIRED_BY_MODE[self.mode] if getattr(self, f) is None]
        if missing:
            raise ValueError(f"mode {self.mode} needs {', '.join(missing)} (or `unknown`)")
        return self


class Measured(_Strict):
    """The figures as measured, in the units their names end with (ms, s, requests/s, tokens/s)."""

    completed: PositiveInt | None = None
    duration_s: PositiveFloat | None = None
    total_input_tokens: PositiveInt | None = None
    total_output_tokens: PositiveInt | None = None
    request_throughput_rps: PositiveFloat | None = None
    output_throughput_tps: PositiveFloat | None = None
    total_throughput_tps: PositiveFloat | None = None
    token_throughput_unspecified_tps: PositiveFloat | None = None
    ttft_ms: Stats | None = None
    tpot_ms: Stats | None = None
    itl_ms: Stats | None = None
    e2el_ms: Stats | None = None
    latency_ms: Stats | None = None

    @model_validator(mode="after")
    def _some(self) -> Self:
        counts = {"completed", "total_input_tokens", "total_output_tokens", "duration_s"}
        if not self.model_fields_set - counts:
            raise ValueError("give at least one measured throughput or latency")
        return self


class _PointEntry(_Strict):
    id: str = Field(min_length=1)
    setup: dict[str, Any] = Field(default_factory=dict)
    workload: dict[str, Any] = Field(default_factory=dict)
    measured: Measured
    # measured quantity (a Measured field) -> why it is neither fitted nor judged: a reason
    # from the source's own text and figures, printed by the fidelity benchmark
    excluded: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _excluded_measured(self) -> Self:
        for name, why in self.excluded.items():
            if name not in self.measured.model_fields_set:
                raise ValueError(f"excluded.{name}: not a measured quantity of this point")
            if len(why.split()) < 5:
                raise ValueError(f"excluded.{name}: give the source-based reason in words")
        return self


class Source(_Strict):
    """One publication (page, PR, table); the split is decided per source."""

    id: str = Field(min_length=1)
    split: Split
    title: str = Field(min_length=1)
    url: str = Field(pattern=r"^https?://")
    kind: str
    tool: str
    caveats: tuple[str, ...] = ()
    setup: dict[str, Any] = Field(default_factory=dict)
    workload: dict[str, Any] = Field(default_factory=dict)
    points: tuple[_PointEntry, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_points(self) -> Self:
        _raise_on_duplicates((p.id for p in self.points), f"point id in source {self.id}")
        return self


class KernelCeilings(_Strict):
    """What one GPU's kernels achieved, by CUDA events (bench/device/gpu_probe.py's sections)."""

    copy_tbps: PositiveFloat  # device-to-device copy, bytes read + written
    read_tbps: PositiveFloat  # a reduction over a tensor: bytes read
    weight_stream_tbps: PositiveFloat  # a model's linear layers at 1 token per step
    gemm_tflops: PositiveFloat  # the same layers at >= 2048 tokens per step, best
    kv_read_tbps: PositiveFloat  # one-token attention over a KV cache, best batch x context
    kv_read_tbps_large_batch: PositiveFloat  # ... median over batches of 64 and more
    attn_prefill_tflops: PositiveFloat  # causal attention over a whole prompt, best length


class KernelSource(_Strict):
    """Kernel-level figures measured in this repository on a lent GPU: not serving results, so
    never fitted or replayed; they bound what a GPU profile may assume (calibration.kernels)."""

    id: str = Field(min_length=1)
    provenance: Literal["measured here"]
    gpu_profile: str = Field(min_length=1)
    device: str = Field(min_length=1)
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    script: str = Field(min_length=1)  # the command that measured them, from the checkout
    raw: str = Field(min_length=1)  # every run's figures, in the repository
    # runs of the probe's step_overlap section (linear and attention interleaved), if any
    overlap_raw: str | None = None
    runs: PositiveInt
    shapes: str = Field(min_length=1)
    caveats: tuple[str, ...] = ()
    ceilings: KernelCeilings


class _File(_Strict):
    schema_version: Literal[1]
    sources: tuple[Source, ...] = Field(min_length=1)
    kernels: tuple[KernelSource, ...] = ()

    @model_validator(mode="after")
    def _unique_sources(self) -> Self:
        _raise_on_duplicates((s.id for s in self.sources), "source id")
        _raise_on_duplicates((k.id for k in self.kernels), "kernels id")
        return self


@dataclass(frozen=True)
class Point:
    """One measured point with its source's defaults merged in; `id` is `source/point`."""

    id: str
    source: Source
    setup: Setup
    workload: Workload
    measured: Measured
    excluded: Mapping[str, str] = field(default_factory=dict, hash=False)  # quantity -> why

    @property
    def split(self) -> Split:
        return self.source.split


@dataclass(frozen=True)
class MeasurementSet:
    sources: tuple[Source, ...]
    points: tuple[Point, ...]
    kernels: tuple[KernelSource, ...] = ()

    def split(self, name: Split) -> tuple[Point, ...]:
        return tuple(p for p in self.points if p.split == name)


@dataclass(frozen=True)
class Coverage:
    """What the set covers, for the README and the tests."""

    points: int
    fit_points: int
    heldout_points: int
    gpu_types: tuple[str, ...]
    models: tuple[str, ...]
    fit_gpu_types: tuple[str, ...]

    @property
    def heldout_share(self) -> float:
        return self.heldout_points / self.points


def default_path() -> Path:
    """twin/calibration/measurements.yaml of the checkout this package was imported from."""
    return Path(__file__).resolve().parents[2] / "calibration" / "measurements.yaml"


def load_measurements(path: str | Path | None = None) -> MeasurementSet:
    """Read and validate the measurement file (the checkout's own when `path` is None)."""
    file = Path(path) if path is not None else default_path()
    try:
        data = read_yaml_file(file)
    except YamlFileError as exc:
        raise MeasurementError(str(exc)) from None
    if not isinstance(data, Mapping):
        raise MeasurementError(f"{file}: expected a mapping with schema_version and sources")
    return parse_measurements(data, origin=str(file))


def parse_measurements(data: Mapping[str, Any], origin: str = "measurements") -> MeasurementSet:
    """Validate parsed YAML and merge each source's defaults into its points."""
    try:
        file = _File.model_validate(data)
    except ValidationError as exc:
        raise MeasurementError(f"{origin}{_first_error(exc, sep=': ')}") from None
    points = tuple(
        _resolve(source, entry, origin) for source in file.sources for entry in source.points
    )
    return MeasurementSet(sources=file.sources, points=points, kernels=file.kernels)


def summarize(measurements: MeasurementSet) -> Coverage:
    points = measurements.points
    fit = measurements.split("fit")
    return Coverage(
        points=len(points),
        fit_points=len(fit),
        heldout_points=len(points) - len(fit),
        gpu_types=_distinct(p.setup.gpu_type for p in points),
        models=_distinct(p.setup.model for p in points),
        fit_gpu_types=_distinct(p.setup.gpu_type for p in fit),
    )


def check_profiles(
    measurements: MeasurementSet, gpu_profiles: Iterable[str], model_profiles: Iterable[str]
) -> list[str]:
    """One line per point whose profile name the twin's catalog does not have."""
    gpus, models = set(gpu_profiles) | {"unknown"}, set(model_profiles)
    errors = []
    for point in measurements.points:
        gpu, model = point.setup.gpu_profile, point.setup.model_profile
        if gpu is not None and gpu not in gpus:
            errors.append(f"{point.id}: setup.gpu_profile {gpu!r} is not a twin GPU profile")
        if model is not None and model not in models:
            errors.append(f"{point.id}: setup.model_profile {model!r} is not a twin model profile")
    return errors


def without_profile(measurements: MeasurementSet) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The GPU types and the models of the set that have no twin profile yet."""
    points = measurements.points
    gpus = _distinct(p.setup.gpu_type for p in points if p.setup.gpu_profile is None)
    models = _distinct(p.setup.model for p in points if p.setup.model_profile is None)
    return gpus, models


def _resolve(source: Source, entry: _PointEntry, origin: str) -> Point:
    point_id = f"{source.id}/{entry.id}"
    where = f"{origin}: {point_id}"
    setup = _merged(Setup, source.setup, entry.setup, f"{where}: setup")
    workload = _merged(Workload, source.workload, entry.workload, f"{where}: workload")
    return Point(
        id=point_id,
        source=source,
        setup=setup,
        workload=workload,
        measured=entry.measured,
        excluded=dict(entry.excluded),
    )


def _merged(model: type[M], defaults: Mapping[str, Any], own: Mapping[str, Any], where: str) -> M:
    try:
        return model.model_validate({**defaults, **own})
    except ValidationError as exc:
        raise MeasurementError(f"{where}{_first_error(exc, sep='.')}") from None


def _first_error(exc: ValidationError, sep: str = "") -> str:
    """The first problem as `<sep>field.path: message`, counting the others."""
    error = exc.errors()[0]
    path = ".".join(str(part) for part in error["loc"])
    text = f"{sep}{path}: {error['msg']}" if path else f": {error['msg']}"
    more = exc.error_count() - 1
    return f"{text} (and {more} more)" if more else text


def _raise_on_duplicates(ids: Iterable[str], what: str) -> None:
    seen: set[str] = set()
    for item in ids:
        if item in seen:
            raise ValueError(f"duplicate {what}: {item}")
        seen.add(item)


def _distinct(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(values)))
