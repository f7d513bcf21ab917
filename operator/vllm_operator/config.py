"""Operator configuration, built once at startup from `VLLM_OPERATOR_*` and passed down.

Sources, later wins: built-in defaults < the YAML file named by VLLM_OPERATOR_CONFIG < one env
var per setting (VLLM_OPERATOR_<SETTING>, e.g. VLLM_OPERATOR_PROMETHEUS_URL). The GPU catalog
comes from the file's `gpuCatalog` map and then from the YAML file named by
VLLM_OPERATOR_GPU_CATALOG, each overriding or extending the built-in types.

Nothing here reads os.environ: callers pass the environment mapping in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from vllm_operator.api.durations import Duration
from vllm_operator.api.errors import error_message, format_validation_error
from vllm_operator.api.policy import PolicyConfig
from vllm_operator.catalog import CatalogError, GPUCatalog, build_gpu_catalog
from vllm_operator.constants import DEFAULT_IMAGE
from vllm_operator.yamlfile import YamlFileError, read_yaml_file

ENV_PREFIX: Final = "VLLM_OPERATOR_"
ENV_CONFIG_FILE: Final = f"{ENV_PREFIX}CONFIG"
ENV_GPU_CATALOG_FILE: Final = f"{ENV_PREFIX}GPU_CATALOG"


class ConfigError(ValueError):
    """Bad operator configuration; the message names the file or env var and the key."""


class OperatorConfig(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    namespace: str | None = Field(
        default=None, description="Namespace to watch; every namespace when unset."
    )
    prometheus_url: str = Field(
        default="http://prometheus-operated.monitoring.svc:9090",
        min_length=1,
        description="Prometheus the tuner queries.",
    )
    prometheus_timeout_seconds: float = Field(default=10.0, gt=0, description="Query timeout.")
    metrics_window: Duration = Field(default="5m", description="Range of rate/quantile queries.")
    default_image: str = Field(
        default=DEFAULT_IMAGE, min_length=1, description="Image when spec.image is unset."
    )
    template_dir: str | None = Field(
        default=None,
        description="Directory of manifest templates that replace the built-in ones by file name.",
    )
    resync_seconds: float = Field(default=300.0, gt=0, description="Drift-repair interval.")
    tuning_interval_seconds: float = Field(default=60.0, gt=0, description="Tuner interval.")
    tuning_look_cpu_per_minute: float = Field(
        default=2.0,
        gt=0,
        description=(
            "CPU-seconds a minute the tuner spends on looks for a budget move (autotune Auto or "
            "Recommend; about 0.5 CPU-s a look) over all services; beyond about 40 such services "
            "at the default each is looked at less often than every 10 minutes (docs/tuning.md)."
        ),
    )
    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Port of the operator's own /metrics (vllm_operator_*); off when unset.",
    )
    metrics_address: str = Field(
        default="127.0.0.1",
        min_length=1,
        description=(
            "Address the /metrics port binds: the pod IP in the chart (downward API), "
            "127.0.0.1 by default so that nothing outside the host can reach it."
        ),
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info",
        description=(
            "Level of the operator's log (stderr): info has its decisions and condition changes; "
            "kopf's own lines show from warning, every line at debug."
        ),
    )
    tuning_time_scale: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="Multiplies every tuning cooldown and window (tests compress time with 0.05).",
    )
    gpu_catalog: GPUCatalog = Field(
        default_factory=GPUCatalog, description="GPU types known to the operator."
    )
    policy: PolicyConfig = Field(
        default_factory=PolicyConfig,
        description="Denied flags, env and images this cluster allows (docs/security.md §2).",
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _any_case(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value  # INFO as logging spells it

    @model_validator(mode="after")
    def _default_image_allowed(self) -> OperatorConfig:
        if not self.policy.image_allowed(self.default_image):
            raise ValueError(
                f"defaultImage {self.default_image!r} does not match policy.allowedImages; "
                "allow it or change defaultImage"
            )
        return self


def _env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


# Settings an env var may carry (the catalog and file paths have their own variables).
_ENV_SETTINGS: Final = {
    _env_name(f): f for f in OperatorConfig.model_fields if f not in ("gpu_catalog", "policy")
}


def _read_yaml_map(path: str, what: str) -> dict[str, Any]:
    try:
        data = read_yaml_file(path)
    except YamlFileError as exc:
        raise ConfigError(f"{what}: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{what}: {path} must hold a YAML map")
    return data


def _prefixed(source: str | None, lines: str) -> str:
    return "\n".join(f"{source}: {line}" for line in lines.splitlines())


def _from_env(env: Mapping[str, str]) -> dict[str, str]:
    settings: dict[str, str] = {}
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or name in (ENV_CONFIG_FILE, ENV_GPU_CATALOG_FILE):
            continue
        if name not in _ENV_SETTINGS:
            known = ", ".join(sorted([*_ENV_SETTINGS, ENV_CONFIG_FILE, ENV_GPU_CATALOG_FILE]))
            raise ConfigError(f"{name} is not a known setting (known: {known})")
        settings[_ENV_SETTINGS[name]] = value
    return settings


def _load_catalog(env: Mapping[str, str], file_entries: Any, config_file: str | None) -> GPUCatalog:
    try:
        catalog = build_gpu_catalog(file_entries)
    except CatalogError as exc:
        raise ConfigError(_prefixed(config_file, str(exc))) from None
    catalog_file = env.get(ENV_GPU_CATALOG_FILE)
    if not catalog_file:
        return catalog
    entries = _read_yaml_map(catalog_file, ENV_GPU_CATALOG_FILE)
    try:
        return build_gpu_catalog(entries, base=catalog.types, source="")
    except CatalogError as exc:
        raise ConfigError(_prefixed(catalog_file, str(exc))) from None


def load_operator_config(env: Mapping[str, str]) -> OperatorConfig:
    """OperatorConfig from an environment mapping (pass os.environ at the edge)."""
    config_file = env.get(ENV_CONFIG_FILE)
    file_settings = _read_yaml_map(config_file, ENV_CONFIG_FILE) if config_file else {}
    catalog = _load_catalog(env, file_settings.pop("gpuCatalog", None), config_file)
    try:
        from_file = OperatorConfig.model_validate(file_settings)
    except ValidationError as exc:
        lines = "\n".join(format_validation_error(exc))
        raise ConfigError(_prefixed(config_file, lines)) from None

    merged = {**from_file.model_dump(exclude={"gpu_catalog"}), **_from_env(env)}
    try:
        return OperatorConfig.model_validate({**merged, "gpu_catalog": catalog})
    except ValidationError as exc:
        # Only env values can fail here (the file's passed above), so name the variable.
        problems = [f"{_env_name(str(e['loc'][0]))}: {error_message(e)}" for e in exc.errors()]
        raise ConfigError("\n".join(problems)) from None
