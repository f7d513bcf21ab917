"""The operator as a real process against the local control plane, for integration tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kube import ROOT, Cluster


class OperatorProcess:
    def __init__(self, cluster: Cluster, log_path: Path, env: dict[str, str] | None = None) -> None:
        self.cluster = cluster
        self.log_path = log_path
        self.extra_env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.cluster.kubeconfig),
            "VLLM_OPERATOR_RESYNC_SECONDS": "30",
            # The control loop with time compressed 20x: cooldowns and windows of seconds.
            "VLLM_OPERATOR_PROMETHEUS_URL": self.cluster.prometheus_url,
            "VLLM_OPERATOR_TUNING_INTERVAL_SECONDS": "2",
            "VLLM_OPERATOR_TUNING_TIME_SCALE": "0.05",
            "VLLM_OPERATOR_METRICS_WINDOW": "20s",
            **self.extra_env,
        }
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "vllm_operator.cli",
                "run",
                "--all-namespaces",
                "--liveness",
                "",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def install_crds(cluster: Cluster) -> None:
    # --force-conflicts: a chart install (helm applies its crds/ server-side) may co-own the CRD
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    cluster.kubectl(
        "wait", "--for=condition=Established", "crd/vllmservices.serving.vllmop.io", "--timeout=60s"
    )


@pytest.fixture(scope="session")
def operator_process(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    install_crds(cluster)
    op = OperatorProcess(cluster, tmp_path_factory.mktemp("operator") / "operator.log")
    op.start()
    yield op
    op.stop()
