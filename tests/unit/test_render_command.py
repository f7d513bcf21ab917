"""The `vllm-operator render` command: every manifest of every document, refusals as lines."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures.specs.cases import merge_patch
from tests.unit.render_support import BASE, CFG
from tests.unit.render_support import svc as _svc
from vllm_operator.cli import UsageError
from vllm_operator.commands import render as render_command
from vllm_operator.render import (
    render_all,
)


def _run(tmp_path: Path, text: str, *extra: str) -> int:
    path = tmp_path / "svc.yaml"
    path.write_text(text, encoding="utf-8")
    parser = argparse.ArgumentParser()
    render_command.add_arguments(parser)
    return render_command.run(parser.parse_args(["-f", str(path), *extra]))


def _doc(patch: dict[str, Any] | None = None) -> str:
    return yaml.safe_dump(merge_patch(BASE, patch or {}))


def test_render_command_prints_every_manifest_of_every_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The command reads the process environment; keep a developer's settings out of the check.
    for name in [n for n in os.environ if n.startswith("VLLM_OPERATOR_")]:
        monkeypatch.delenv(name)
    second = _doc({"metadata": {"name": "other"}, "spec": {"monitoring": {"podMonitor": True}}})
    assert _run(tmp_path, _doc() + "---\n" + second) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    expected = (
        render_all(_svc(), CFG).manifests
        + render_all(
            _svc({"metadata": {"name": "other"}, "spec": {"monitoring": {"podMonitor": True}}}), CFG
        ).manifests
    )
    assert docs == expected


def test_render_command_refuses_invalid_specs_with_field_named_lines(tmp_path: Path) -> None:
    bad = _doc({"spec": {"budgets": {"running": {"maxSeqs": 4, "maxActiveSeqs": 8}}}})
    with pytest.raises(UsageError) as info:
        _run(tmp_path, bad)
    path = tmp_path / "svc.yaml"
    assert str(info.value) == (
        f"{path}: spec.budgets.running.maxActiveSeqs must be <= spec.budgets.running.maxSeqs"
    )
    other = _doc({"spec": {"replicas": -1, "gpu": {"count": 0}}})
    with pytest.raises(UsageError) as info:
        _run(tmp_path, _doc() + "---\n" + other + "---\nkind: ConfigMap\n")
    assert str(info.value).splitlines() == [
        f"{path} (document 2): spec.replicas: Input should be greater than or equal to 0",
        f"{path} (document 2): spec.gpu.count: Input should be greater than or equal to 1",
        f"{path} (document 3): not a VLLMService",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no VLLMService documents"),
        ("a: [\n", "not valid YAML"),
    ],
)
def test_render_command_refuses_empty_or_broken_files(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        _run(tmp_path, text)


def test_render_command_reports_unknown_gpu_types(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        _run(tmp_path, _doc({"spec": {"gpu": {"type": "B200"}}}))
    assert str(info.value) == (
        f"{tmp_path / 'svc.yaml'}: spec.gpu.type: unknown GPU type 'B200'; known types: "
        "A100-40GB, A100-80GB, H100-80GB, H200-141GB, L4, L40S, MI300X, T4"
    )


def test_render_command_uses_the_config_file_catalog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "operator.yaml"
    config.write_text(
        "gpuCatalog:\n  B200:\n    resourceName: nvidia.com/gpu\n"
        "    nodeLabels: {nvidia.com/gpu.product: NVIDIA-B200}\n"
        "    memoryGiB: 180\n    memoryBandwidthGBps: 8000\n",
        encoding="utf-8",
    )
    assert _run(tmp_path, _doc({"spec": {"gpu": {"type": "B200"}}}), "--config", str(config)) == 0
    deployment = next(yaml.safe_load_all(capsys.readouterr().out))
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-B200"}
    with pytest.raises(UsageError, match="cannot read"):
        _run(tmp_path, _doc(), "--config", str(tmp_path / "missing.yaml"))


def test_render_command_prints_warnings_to_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = {"spec": {"monitoring": {"serviceMonitor": True, "podMonitor": True}}}
    assert _run(tmp_path, _doc(both)) == 0
    assert capsys.readouterr().err == (
        f"warning: {tmp_path / 'svc.yaml'}: spec.monitoring: serviceMonitor and podMonitor are "
        "both on; Prometheus will scrape every pod twice\n"
    )


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\xff\xfe", r"operator\.yaml: not UTF-8 text$"),
        (b"a: [1\nb: 2\n", r"operator\.yaml: not valid YAML: line 2, column 2: expected ','"),
    ],
)
def test_a_config_file_that_is_not_yaml_text_is_one_line(
    tmp_path: Path, data: bytes, says: str
) -> None:
    config = tmp_path / "operator.yaml"
    config.write_bytes(data)
    with pytest.raises(UsageError, match=says) as caught:
        _run(tmp_path, _doc(), "--config", str(config))
    assert "\n" not in str(caught.value)
