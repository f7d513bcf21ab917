"""The operator as a real process against the local control plane, for integration tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kube import ROOT, Cluster


class OperatorProcess:
    def __init__(
        self,
        cluster: Cluster,
        log_path: Path,
        env: dict[str, str] | None = None,
        args: tuple[str, ...] = ("--all-namespaces",),
    ) -> None:
        """`args`: the scope and peering arguments of `vllm-operator run` (HA: -n NS --peering P
        --priority N, with POD_ID and POD_NAMESPACE in `env` as the chart's StatefulSet sets)."""
        self.cluster = cluster
        self.log_path = log_path
        self.extra_env = env or {}
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None
        self.metrics_port = free_port()
        # the real Prometheus scrapes the operator's own /metrics (file-based discovery, as the
        # harness registers the twins), under job "vllm" with component=operator
        self.target_file = cluster.targets_dir / f"operator_{self.metrics_port}.json"

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
            "VLLM_OPERATOR_METRICS_PORT": str(self.metrics_port),
            "VLLM_OPERATOR_METRICS_ADDRESS": "127.0.0.1",
            **self.extra_env,
        }
        target = [
            {
                "targets": [f"127.0.0.1:{self.metrics_port}"],
                "labels": {"component": "operator", "operator_port": str(self.metrics_port)},
            }
        ]
        self.target_file.write_text(json.dumps(target))
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "vllm_operator.cli",
                "run",
                *self.args,
                "--liveness",
                "",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )

    def stop(self) -> None:
        self.target_file.unlink(missing_ok=True)
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def install_crds(cluster: Cluster) -> None:
    # --force-conflicts: a chart install (helm applies its crds/ server-side) may co-own the CRD
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    cluster.wait_established("vllmservices.serving.vllmop.io")


@pytest.fixture(scope="session")
def operator_process(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    install_crds(cluster)
    op = OperatorProcess(cluster, tmp_path_factory.mktemp("operator") / "operator.log")
    op.start()
    yield op
    op.stop()


def install_kopf_crds(cluster: Cluster) -> None:
    """The chart's kopf.dev peering CRDs (cluster-scoped, inert unless an operator peers)."""
    crds = ROOT / "charts" / "vllm-operator" / "crds" / "kopf.dev_peerings.yaml"
    cluster.kubectl("apply", "--server-side", "-f", str(crds))
    cluster.wait_established("kopfpeerings.kopf.dev", "clusterkopfpeerings.kopf.dev")
