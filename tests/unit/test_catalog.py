"""GPU catalog defaults and overrides; operator config from env and files."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_operator.catalog import (
    DEFAULT_GPU_TYPES,
    CatalogError,
    GPUCatalog,
    GPUType,
    build_gpu_catalog,
)
from vllm_operator.config import ConfigError, OperatorConfig, load_operator_config

NV = "nvidia.com/gpu.product"


@pytest.mark.parametrize(
    ("name", "resource", "labels", "memory", "bandwidth", "host"),
    [
        ("H100-80GB", "nvidia.com/gpu", {NV: "NVIDIA-H100-80GB-HBM3"}, 80, 3350, 64),
        ("H200-141GB", "nvidia.com/gpu", {NV: "NVIDIA-H200"}, 141, 4800, 64),
        ("A100-80GB", "nvidia.com/gpu", {NV: "NVIDIA-A100-SXM4-80GB"}, 80, 2039, 64),
        ("A100-40GB", "nvidia.com/gpu", {NV: "NVIDIA-A100-SXM4-40GB"}, 40, 1555, 48),
        ("L40S", "nvidia.com/gpu", {NV: "NVIDIA-L40S"}, 48, 864, 48),
        ("L4", "nvidia.com/gpu", {NV: "NVIDIA-L4"}, 24, 300, 32),
        ("T4", "nvidia.com/gpu", {NV: "Tesla-T4"}, 16, 320, 16),
        (
            "MI300X",
            "amd.com/gpu",
            {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"},
            192,
            5300,
            64,
        ),
    ],
)
def test_default_catalog(
    name: str,
    resource: str,
    labels: dict[str, str],
    memory: float,
    bandwidth: float,
    host: float,
) -> None:
    assert GPUCatalog().get(name) == GPUType(
        resource_name=resource,
        node_labels=labels,
        memory_gib=memory,
        memory_bandwidth_gbps=bandwidth,
        cpu_per_gpu=8,
        host_memory_gib_per_gpu=host,
    )


def test_known_types_are_sorted_and_complete() -> None:
    assert GPUCatalog().known() == (
        "A100-40GB",
        "A100-80GB",
        "H100-80GB",
        "H200-141GB",
        "L4",
        "L40S",
        "MI300X",
        "T4",
    )
    assert GPUCatalog().get("B200") is None


def test_entries_override_partially_and_extend() -> None:
    catalog = build_gpu_catalog(
        {
            "L4": {"nodeLabels": {"cloud.google.com/gke-accelerator": "nvidia-l4"}},
            "B200": {
                "resourceName": "nvidia.com/gpu",
                "nodeLabels": {NV: "NVIDIA-B200"},
                "memoryGiB": 180,
                "memoryBandwidthGBps": 8000,
            },
        }
    )
    l4 = catalog.get("L4")
    assert l4 == DEFAULT_GPU_TYPES["L4"].model_copy(
        update={"node_labels": {"cloud.google.com/gke-accelerator": "nvidia-l4"}}
    )
    assert catalog.get("B200") is not None
    assert catalog.get("H100-80GB") == DEFAULT_GPU_TYPES["H100-80GB"]
    # Defaults are never mutated by an override.
    assert GPUCatalog().get("L4") == DEFAULT_GPU_TYPES["L4"]


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (
            {"B200": {"resourceName": "nvidia.com/gpu"}},
            "gpuCatalog.B200.nodeLabels: required field is missing\n"
            "gpuCatalog.B200.memoryGiB: required field is missing\n"
            "gpuCatalog.B200.memoryBandwidthGBps: required field is missing",
        ),
        ({"L4": {"memoryGiB": 0}}, "gpuCatalog.L4.memoryGiB: Input should be greater than 0"),
        ({"L4": {"memory": 24}}, "gpuCatalog.L4.memory: unknown field"),
        (
            {"L4": {"nodeLabels": {}}},
            "gpuCatalog.L4.nodeLabels: Dictionary should have at least 1 item after validation, "
            "not 0",
        ),
        ({"L4": "nvidia"}, "gpuCatalog.L4: must be a map with resourceName, nodeLabels, ..."),
        (["L4"], "gpuCatalog: must be a map of GPU type name to entry"),
    ],
)
def test_bad_entries_name_the_key(entries: object, message: str) -> None:
    with pytest.raises(CatalogError) as info:
        build_gpu_catalog(entries)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_config_defaults() -> None:
    cfg = load_operator_config({"PATH": "/usr/bin", "HOME": "/root"})
    assert cfg == OperatorConfig()
    assert cfg.namespace is None
    assert cfg.default_image == "vllm/vllm-openai:v0.33.0"
    assert cfg.prometheus_url == "http://prometheus-operated.monitoring.svc:9090"
    assert cfg.metrics_window == "5m"
    assert cfg.gpu_catalog == GPUCatalog()


def test_config_from_env() -> None:
    cfg = load_operator_config(
        {
            "VLLM_OPERATOR_NAMESPACE": "llm",
            "VLLM_OPERATOR_PROMETHEUS_URL": "http://127.0.0.1:9090",
            "VLLM_OPERATOR_PROMETHEUS_TIMEOUT_SECONDS": "2.5",
            "VLLM_OPERATOR_METRICS_WINDOW": "2m",
            "VLLM_OPERATOR_DEFAULT_IMAGE": "mirror/vllm:v0.33.0",
            "VLLM_OPERATOR_TEMPLATE_DIR": "/etc/vllm-operator/templates",
            "VLLM_OPERATOR_RESYNC_SECONDS": "30",
            "VLLM_OPERATOR_TUNING_INTERVAL_SECONDS": "15",
            "VLLM_OPERATOR_LOG_LEVEL": "WARNING",
        }
    )
    assert cfg == OperatorConfig(
        namespace="llm",
        prometheus_url="http://127.0.0.1:9090",
        prometheus_timeout_seconds=2.5,
        metrics_window="2m",
        default_image="mirror/vllm:v0.33.0",
        template_dir="/etc/vllm-operator/templates",
        resync_seconds=30,
        tuning_interval_seconds=15,
        log_level="warning",
    )


def test_env_wins_over_the_file_which_wins_over_defaults(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("namespace: from-file\nresyncSeconds: 60\n", encoding="utf-8")
    cfg = load_operator_config(
        {"VLLM_OPERATOR_CONFIG": str(path), "VLLM_OPERATOR_NAMESPACE": "from-env"}
    )
    assert (cfg.namespace, cfg.resync_seconds, cfg.tuning_interval_seconds) == ("from-env", 60, 60)


def test_catalog_from_config_file_and_catalog_file(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("gpuCatalog:\n  L4: {memoryGiB: 23}\n  T4: {memoryGiB: 15}\n")
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        "T4: {memoryGiB: 14}\n"
        "B200: {resourceName: nvidia.com/gpu, nodeLabels: {gpu: b200}, memoryGiB: 180, "
        "memoryBandwidthGBps: 8000}\n"
    )
    cfg = load_operator_config(
        {"VLLM_OPERATOR_CONFIG": str(config), "VLLM_OPERATOR_GPU_CATALOG": str(catalog)}
    )
    types = cfg.gpu_catalog.types
    assert types["L4"].memory_gib == 23  # from the config file, kept by the catalog file
    assert types["T4"].memory_gib == 14  # the catalog file comes last
    assert types["B200"].node_labels == {"gpu": "b200"}
    assert types["H100-80GB"] == DEFAULT_GPU_TYPES["H100-80GB"]


@pytest.mark.parametrize(
    ("env", "files", "message"),
    [
        (
            {"VLLM_OPERATOR_RESYNC_SECOND": "30"},
            {},
            "VLLM_OPERATOR_RESYNC_SECOND is not a known setting (known: ",
        ),
        (
            {"VLLM_OPERATOR_RESYNC_SECONDS": "soon"},
            {},
            "VLLM_OPERATOR_RESYNC_SECONDS: Input should be a valid number, unable to parse string "
            "as a number",
        ),
        (
            {"VLLM_OPERATOR_LOG_LEVEL": "verbose"},
            {},
            "VLLM_OPERATOR_LOG_LEVEL: Input should be 'debug', 'info', 'warning' or 'error'",
        ),
        (
            {"VLLM_OPERATOR_METRICS_WINDOW": "5 minutes"},
            {},
            "VLLM_OPERATOR_METRICS_WINDOW: '5 minutes' is not a duration",
        ),
        (
            {"VLLM_OPERATOR_CONFIG": "{dir}/missing.yaml"},
            {},
            "VLLM_OPERATOR_CONFIG: {dir}/missing.yaml: cannot read: No such file or directory",
        ),
        (
            {"VLLM_OPERATOR_CONFIG": "{dir}/c.yaml"},
            {"c.yaml": "resyncSecond: 5\n"},
            "{dir}/c.yaml: resyncSecond: unknown field",
        ),
        (
            {"VLLM_OPERATOR_CONFIG": "{dir}/c.yaml"},
            {"c.yaml": "- a\n"},
            "VLLM_OPERATOR_CONFIG: {dir}/c.yaml must hold a YAML map",
        ),
        (
            {"VLLM_OPERATOR_CONFIG": "{dir}/c.yaml"},
            {"c.yaml": "a: [\n"},
            "VLLM_OPERATOR_CONFIG: {dir}/c.yaml: not valid YAML",
        ),
        (
            {"VLLM_OPERATOR_CONFIG": "{dir}/c.yaml"},
            {"c.yaml": "gpuCatalog:\n  L4: {memoryGiB: -1}\n"},
            "{dir}/c.yaml: gpuCatalog.L4.memoryGiB: Input should be greater than 0",
        ),
        (
            {"VLLM_OPERATOR_GPU_CATALOG": "{dir}/g.yaml"},
            {"g.yaml": "- L4\n"},
            "VLLM_OPERATOR_GPU_CATALOG: {dir}/g.yaml must hold a YAML map",
        ),
        (
            {"VLLM_OPERATOR_GPU_CATALOG": "{dir}/g.yaml"},
            {"g.yaml": "X1: {memoryGiB: 1}\n"},
            "{dir}/g.yaml: X1.resourceName: required field is missing",
        ),
    ],
)
def test_bad_config_names_the_key(
    tmp_path: Path, env: dict[str, str], files: dict[str, str], message: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    env = {k: v.format(dir=tmp_path) for k, v in env.items()}
    with pytest.raises(ConfigError) as info:
        load_operator_config(env)
    assert str(info.value).startswith(message.format(dir=tmp_path))
