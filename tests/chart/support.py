"""Helm, the rendered chart, and tools for the chart tier.

helm comes from the project's toolchain (e2e/toolchain.sh builds it next to kubectl), so the chart
tests run the same helm v4 that `make test` and the docs use.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.kube import ROOT, _cluster_env
from tests.support.operator import free_port

CHART = ROOT / "charts" / "vllm-operator"
VALUES_DIR = Path(__file__).parent / "values"
GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"

# Release name and namespace of the golden renderings (fixed, so the files are stable).
GOLDEN_RELEASE = "vllmop"
GOLDEN_NAMESPACE = "vllm-system"


def toolchain_bin() -> Path:
    return Path(_cluster_env()["VLLMOP_TOOLCHAIN_BIN"])


def venv_tool(name: str) -> str:
    """A console script of this interpreter's environment (the project venv), else from PATH."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    assert found, f"{name} is not installed: `pip install -e '.[dev]'` installs it"
    return found


def run(cmd: list[str], *, check: bool = True, timeout: float = 180, **kw: Any) -> Any:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited {proc.returncode}\nstdout:\n{proc.stdout}\n"
            f"stderr:\n{proc.stderr}"
        )
    return proc


@dataclass(frozen=True)
class Helm:
    binary: Path
    kubeconfig: Path | None = None

    def __call__(self, *args: str, check: bool = True, timeout: float = 300) -> Any:
        cmd = [str(self.binary), *args]
        if self.kubeconfig is not None:
            cmd += ["--kubeconfig", str(self.kubeconfig)]
        return run(cmd, check=check, timeout=timeout)

    def template(
        self,
        *,
        release: str = GOLDEN_RELEASE,
        namespace: str = GOLDEN_NAMESPACE,
        values: list[Path] | None = None,
        sets: list[str] | None = None,
        check: bool = True,
    ) -> Any:
        args = ["template", release, str(CHART), "--namespace", namespace]
        for v in values or []:
            args += ["-f", str(v)]
        for s in sets or []:
            args += ["--set", s]
        return self(*args, check=check)


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    hits = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(hits) == 1, f"{len(hits)} {kind} objects named {name!r} in the rendering"
    return hits[0]


def operator_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    workloads = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]
    assert len(workloads) == 1, [d["kind"] for d in workloads]
    container: dict[str, Any] = workloads[0]["spec"]["template"]["spec"]["containers"][0]
    return container


# --- running the operator as the chart's ServiceAccount ----------------------------------------


def write_token_kubeconfig(admin_kubeconfig: Path, token: str, path: Path) -> Path:
    """A kubeconfig for the same API server that authenticates with a ServiceAccount token."""
    admin = yaml.safe_load(admin_kubeconfig.read_text())
    cluster = admin["clusters"][0]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": cluster["name"], "user": "sa"}}],
        "current-context": "sa",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def loopback_command(container: dict[str, Any], liveness_port: int) -> list[str]:
    """The container's command line with its liveness endpoint on a free loopback port (pods have
    a network namespace each; processes here share loopback). Nothing else changes, so the
    process runs what the pod runs (the same module, scope arguments and peering options)."""
    argv = [*container.get("command", []), *container.get("args", [])]
    return [
        f"--liveness=http://127.0.0.1:{liveness_port}/healthz" if a.startswith("--liveness=") else a
        for a in argv
    ]


def local_command(container: dict[str, Any], liveness_port: int) -> list[str]:
    """loopback_command, runnable here: the tools from the venv."""
    out = loopback_command(container, liveness_port)
    if out and out[0] in ("vllm-operator", "kopf"):
        out[0] = venv_tool(out[0])
    return out


class OperatorRun:
    """One operator process started from a rendered/installed container spec."""

    def __init__(
        self,
        container: dict[str, Any],
        *,
        kubeconfig: Path,
        config_file: Path,
        log_path: Path,
        pod_id: str,
        pod_namespace: str | None = None,
    ) -> None:
        self.port = free_port()
        self.argv = local_command(container, self.port)
        env_from_spec = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("VLLM_OPERATOR_")},
            **env_from_spec,
            "VLLM_OPERATOR_CONFIG": str(config_file),
            "POD_ID": pod_id,
            # pods have a network namespace each; processes here share loopback
            "VLLM_OPERATOR_METRICS_PORT": str(free_port()),
            "VLLM_OPERATOR_METRICS_ADDRESS": "127.0.0.1",
            **({"POD_NAMESPACE": pod_namespace} if pod_namespace else {}),
            "KUBECONFIG": str(kubeconfig),
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        }
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT
        )

    def healthz(self) -> bool:
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        import signal

        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
