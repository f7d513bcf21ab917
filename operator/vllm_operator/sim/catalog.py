"""Loads the GPU and model profiles shipped in `sim/profiles/`, plus an optional user override.

The override file is YAML with any of three top-level keys:

    gpus:          # entries merge field by field into the shipped ones, or add new GPUs
      H100-80GB: {mfu_prefill: 0.5}
    models:
      My-Model-7B: {params: 7.0e+9, ...every field...}
    coefficients:  # StepCoefficients fields (docs/twin-calibration.md §2.3)
      api_overhead: 0.010

The shipped profiles are the hand-written `gpus.yaml` and `models.yaml` with `calibrated.yaml`
merged on top: the output of `vllm-twin calibrate` (the same `gpus`/`coefficients` keys, plus
the fingerprint of what it was fitted from). A user override goes on top of both.

This is the I/O half of the profiles; `engine.profiles` validates the data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from vllm_operator.sim.engine.profiles import (
    GpuProfile,
    ModelProfile,
    ProfileError,
    StepCoefficients,
    gpu_from_mapping,
    model_from_mapping,
)
from vllm_operator.yamlfile import YamlFileError, read_yaml_file

CALIBRATED = "calibrated.yaml"
# coefficients that are achieved shares of a peak, and that the step time divides by
SHARES = frozenset({"eta_w", "eta_kv", "mfu_prefill", "mfu_decode", "mfu_prefill_max"})


@dataclass(frozen=True)
class Catalog:
    gpus: Mapping[str, GpuProfile]
    models: Mapping[str, ModelProfile]
    coefficients: StepCoefficients

    def gpu(self, name: str) -> GpuProfile:
        try:
            return self.gpus[name]
        except KeyError:
            raise KeyError(f"unknown GPU {name!r}; known: {', '.join(self.gpus)}") from None

    def model(self, name: str) -> ModelProfile:
        """A model by profile name or by one of its Hugging Face aliases."""
        if name in self.models:
            return self.models[name]
        for model in self.models.values():
            if name in model.aliases:
                return model
        raise KeyError(f"unknown model {name!r}; known: {', '.join(self.models)}")


def _read_packaged(name: str) -> dict[str, Any]:
    text = resources.files("vllm_operator.sim").joinpath("profiles", name).read_text("utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ProfileError(f"profiles/{name}: expected a mapping at the top level")
    return data


def _check_finite(value: Any, source: str, where: str = "") -> None:
    """Refuse .nan and .inf anywhere: the profiles' range checks let NaN through, and an inf
    overflows the arithmetic built on it."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ProfileError(f"{source}: {where or 'value'} must be a finite number, got {value}")
    if isinstance(value, Mapping):
        for key, item in value.items():
            _check_finite(item, source, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_finite(item, source, f"{where}[{i}]")


def _section(data: Mapping[str, Any], key: str, source: str) -> dict[str, Any]:
    value = data.get(key) or {}
    if not isinstance(value, Mapping):
        raise ProfileError(f"{source}: {key} must be a mapping")
    return dict(value)


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for name, entry in extra.items():
        if not isinstance(entry, Mapping):
            raise ProfileError(f"{name}: expected a mapping of fields")
        merged[str(name)] = {**merged.get(str(name), {}), **entry}
    return merged


def _coefficients(raw: Mapping[str, Any], source: str) -> StepCoefficients:
    known = {f.name for f in fields(StepCoefficients)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ProfileError(f"{source}: unknown coefficient(s) {', '.join(unknown)}")
    for name, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ProfileError(f"{source}: coefficient {name} must be a number >= 0")
        if name in SHARES and not 0 < value <= 1:
            raise ProfileError(f"{source}: coefficient {name} is a share (0 < {name} <= 1)")
    return replace(StepCoefficients(), **{k: float(v) for k, v in raw.items()})


@lru_cache(maxsize=1)
def packaged_catalog() -> Catalog:
    """The shipped profiles, read once: they do not change while a process runs."""
    return load_catalog()


def load_catalog(override: str | Path | None = None, *, calibrated: bool = True) -> Catalog:
    """The shipped profiles, with `override` (a YAML file path) merged on top.

    `calibrated=False` leaves calibrated.yaml out: the hand-written values a fit starts from.
    """
    gpus = _read_packaged("gpus.yaml")
    models = _read_packaged("models.yaml")
    calibrated_data = _read_packaged(CALIBRATED) if calibrated else {}
    gpus = _merge(gpus, _section(calibrated_data, "gpus", CALIBRATED))
    coeffs: dict[str, Any] = _section(calibrated_data, "coefficients", CALIBRATED)
    if override is not None:
        path = Path(override)
        try:
            data = read_yaml_file(path) or {}
        except YamlFileError as exc:
            raise ProfileError(str(exc)) from None
        if not isinstance(data, Mapping):
            raise ProfileError(f"{path}: expected a mapping with gpus/models/coefficients")
        _check_finite(data, str(path))
        unknown = sorted(set(data) - {"gpus", "models", "coefficients"})
        if unknown:
            raise ProfileError(f"{path}: unknown top-level key(s) {', '.join(map(str, unknown))}")
        gpus = _merge(gpus, _section(data, "gpus", str(path)))
        models = _merge(models, _section(data, "models", str(path)))
        coeffs = {**coeffs, **_section(data, "coefficients", str(path))}
    return Catalog(
        gpus={name: gpu_from_mapping(name, raw) for name, raw in gpus.items()},
        models={name: model_from_mapping(name, raw) for name, raw in models.items()},
        coefficients=_coefficients(coeffs, str(override)),
    )
