"""Fixtures for the tiers that run on the local real control plane (e2e/cluster.sh).

The cluster's coordinates come from the environment that `e2e/cluster.sh env` prints (the Makefile
exports them). A test that asks for the cluster when none is up fails with the command to run: the
integration and e2e tiers are never skipped.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parents[2]


class KubectlError(subprocess.CalledProcessError):
    """A failed kubectl, with what it printed on stderr in the message (the plain
    CalledProcessError's shows only the command and the exit status)."""

    def __str__(self) -> str:
        said = " ".join((self.stderr or "").split())[:500]
        return f"{super().__str__()} stderr: {said or '(empty)'}"


@dataclass(frozen=True)
class Cluster:
    kubeconfig: Path
    prometheus_url: str
    targets_dir: Path
    bin_dir: Path
    api: client.ApiClient

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin_dir / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args]
        done = subprocess.run(
            cmd, capture_output=True, text=True, check=False, input=input, timeout=120
        )
        if check and done.returncode != 0:
            raise KubectlError(done.returncode, cmd, done.stdout, done.stderr)
        return done

    def wait_established(self, *crds: str, timeout: float = 60) -> None:
        """Each CRD (by name) has condition Established=True. Polled with `kubectl get`, not
        `kubectl wait`, which exited 1 within a second now and then right after a server-side
        apply of the CRD (twice in seven fresh clusters)."""
        jsonpath = '{.status.conditions[?(@.type=="Established")].status}'
        for crd in crds:
            wait_until(
                lambda crd=crd: (
                    self.kubectl(
                        "get", "crd", crd, "-o", f"jsonpath={jsonpath}", check=False
                    ).stdout.strip()
                    == "True"
                ),
                timeout=timeout,
                what=f"CRD {crd} Established",
            )

    def table(self, *args: str) -> list[dict[str, str]]:
        """`kubectl get ARGS` as the printed table: one {HEADER: cell} per row.

        Cells are cut at the header's column offsets (kubectl left-aligns under each header),
        so an empty cell reads as "" rather than shifting the row.
        """
        header, *rows = self.kubectl("get", *args).stdout.splitlines()
        starts = [m.start() for m in re.finditer(r"\S+", header)]
        names = header.split()
        bounds = list(zip(starts, [*starts[1:], None], strict=True))
        return [
            {n: row[a:b].strip() for n, (a, b) in zip(names, bounds, strict=True)} for row in rows
        ]


def _cluster_env() -> dict[str, str]:
    keys = (
        "KUBECONFIG",
        "VLLMOP_PROMETHEUS_URL",
        "VLLMOP_PROMETHEUS_TARGETS",
        "VLLMOP_TOOLCHAIN_BIN",
        "VLLMOP_AUDIT_LOG",
        "VLLMOP_KWOK_CLUSTER_DIR",
        "VLLMOP_SUPERVISE_DIR",
    )
    if all(os.environ.get(k) for k in keys):
        return {k: os.environ[k] for k in keys}
    out = subprocess.run(
        [str(ROOT / "e2e" / "cluster.sh"), "env"], capture_output=True, text=True, check=True
    ).stdout
    env = {}
    for line in out.splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = value
    return env


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    env = _cluster_env()
    kubeconfig = Path(env["KUBECONFIG"])
    if not kubeconfig.exists():
        pytest.fail(
            f"no local control plane ({kubeconfig} missing): run `e2e/cluster.sh up`",
            pytrace=False,
        )
    api = config.new_client_from_config(config_file=str(kubeconfig))
    return Cluster(
        kubeconfig=kubeconfig,
        prometheus_url=env["VLLMOP_PROMETHEUS_URL"],
        targets_dir=Path(env["VLLMOP_PROMETHEUS_TARGETS"]),
        bin_dir=Path(env["VLLMOP_TOOLCHAIN_BIN"]),
        api=api,
    )


@pytest.fixture
def core(cluster: Cluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api)


@pytest.fixture
def apps(cluster: Cluster) -> client.AppsV1Api:
    return client.AppsV1Api(cluster.api)


@contextmanager
def fresh_namespace(cluster: Cluster) -> Iterator[str]:
    """A new test namespace for the block, deleted after it (the namespace controller cleans it
    up)."""
    core = client.CoreV1Api(cluster.api)
    name = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace({"metadata": {"name": name, "labels": {"vllmop.test": "true"}}})
    try:
        yield name
    finally:
        core.delete_namespace(name, propagation_policy="Background")


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace per test."""
    with fresh_namespace(cluster) as name:
        yield name
