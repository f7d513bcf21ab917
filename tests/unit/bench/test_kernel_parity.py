"""bench/kernel_parity.py: the committed H200 probe beside the twin, as table, JSON and plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench.kernel_parity import main


def test_it_writes_the_table_the_json_and_the_plot(tmp_path: Path) -> None:
    assert main(["--out", str(tmp_path)]) == 0
    body = json.loads((tmp_path / "kernel_parity_h200.json").read_text())
    assert body["gpu_profile"] == "H200-141GB" and body["overreach"] == []
    decode = [s for s in body["steps"] if s["kind"] == "decode"]
    assert {s["batch"] for s in decode} >= {1, 64, 256}
    assert all(
        s["ratio"] == pytest.approx(s["twin_ms"] / s["kernels_ms"], rel=1e-3) for s in decode
    )
    table = (tmp_path / "kernel_parity_h200.md").read_text()
    assert "| decode | 256 | 16384 |" in table and "none." in table
    assert "| batch | context | linear ms | attention ms | step ms |" in table
    assert len(body["step_overlap"]) >= 5
    assert (tmp_path / "kernel_parity_h200.png").stat().st_size > 0


def test_an_unknown_kernels_id_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--kernels", "nope", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--kernels 'nope'" in err[0]
    assert not list(tmp_path.iterdir())
