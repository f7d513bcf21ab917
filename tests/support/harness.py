"""The twin harness (vllm-twin harness) as a fixture: twins for one test namespace."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.kube import ROOT, Cluster


class Harness:
    def __init__(self, cluster: Cluster, namespace: str, workdir: Path, time_scale: float) -> None:
        self.state_file = workdir / "state.json"
        self.log_path = workdir / "harness.log"
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "vllm_twin.cli", "harness",
                "--namespace", namespace,
                "--targets-dir", str(cluster.targets_dir),
                "--state-file", str(self.state_file),
                "--log-dir", str(workdir / "twins"),
                "--time-scale", str(time_scale),
            ],
            env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
            stdout=self.log_path.open("wb"),
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )  # fmt: skip

    def state(self) -> dict[str, Any]:
        if not self.state_file.exists():
            return {"services": {}}
        data: dict[str, Any] = json.loads(self.state_file.read_text())
        return data

    def service(self, namespace: str, name: str) -> dict[str, Any]:
        svc: dict[str, Any] = self.state()["services"].get(f"{namespace}/{name}", {})
        return svc

    def ready_twins(self, namespace: str, name: str) -> dict[str, Any]:
        twins = self.service(namespace, name).get("twins", {})
        return {pod: t for pod, t in twins.items() if t["ready"]}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def harness(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[Harness]:
    h = Harness(cluster, namespace, tmp_path, time_scale=1.0)
    yield h
    h.stop()
