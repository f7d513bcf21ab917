"""The operator image: built (or reused) by e2e/image.sh, run by the engine that built it.

Every run is what the chart's pod gets: UID 65532, a read-only root, /tmp writable (the chart's
emptyDir), no capabilities, no privilege escalation, and the host's network (so 127.0.0.1 is the
local API server). docker and podman get `--read-only`. `buildah run` has no read-only-root flag,
and a root remounted read-only from outside breaks its clean-up (it removes its /run/.containerenv
afterwards), so the run starts as root in the container's own mount namespace, remounts / read-only
there, and `setpriv` (util-linux, in every Debian-based image) drops to 65532 with every capability
gone before the command runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from tests.chart.support import OperatorRun, loopback_command, run
from tests.support.kube import ROOT

IMAGE_SH = ROOT / "e2e" / "image.sh"
USER = "65532:65532"
# Where a pod finds its ServiceAccount's token, the cluster's CA and its namespace:
# /var/run/secrets/kubernetes.io/serviceaccount, and /var/run is a link to /run in Debian images.
# buildah would resolve the link on the host (and mount nothing inside), so it gets the target.
SERVICE_ACCOUNT_DIR = "/run/secrets/kubernetes.io/serviceaccount"


def build_image() -> str:
    """The image's reference; the build's "[image ...]" lines (timings, size) go to the log."""
    proc = run([str(IMAGE_SH), "build"], timeout=1800)
    sys.stderr.write(proc.stderr[-4000:])
    ref: str = proc.stdout.strip().splitlines()[-1]
    return ref


def image_engine() -> str:
    engine: str = run([str(IMAGE_SH), "engine"]).stdout.strip()
    return engine


class Container:
    """One container of the image. `volumes` maps a path in the container to one here."""

    def __init__(
        self,
        engine: str,
        image: str,
        *,
        volumes: dict[str, Path] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.engine, self.image = engine, image
        self.volumes, self.env = volumes or {}, env or {}
        self.name: str | None = None

    def __enter__(self) -> Container:
        if self.engine == "buildah":
            self.name = run(["buildah", "from", "-q", self.image]).stdout.strip()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self.name:
            run(["buildah", "rm", self.name], check=False)

    def argv(self, command: list[str]) -> list[str]:
        """The host command line that runs `command` (argv[0] found on the image's PATH)."""
        vols = [a for c, h in self.volumes.items() for a in ("-v", f"{h}:{c}")]
        envs = [a for k, v in self.env.items() for a in ("--env", f"{k}={v}")]
        if self.engine == "buildah":
            assert self.name, "use the Container as a context manager"
            uid, gid = USER.split(":")
            drop = (
                "mount -o remount,bind,ro / && exec setpriv"
                f" --reuid={uid} --regid={gid} --clear-groups --no-new-privs"
                ' --inh-caps=-all --bounding-set=-all -- "$@"'
            )
            return [
                *("buildah", "run", "--isolation", "chroot", "--network", "host"),
                *("--user", "0:0", "--cap-add", "CAP_SYS_ADMIN", *vols, *envs, self.name),
                *("--", "sh", "-c", drop, "sh", *command),
            ]
        return [
            *(self.engine, "run", "--rm", "--read-only", "--network", "host", "--user", USER),
            *("--tmpfs", "/run", *vols, *envs, "--entrypoint", command[0], self.image),
            *command[1:],
        ]

    def run(self, command: list[str], *, check: bool = True) -> Any:
        return run(self.argv(command), check=check)


def stop_group(proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """SIGTERM to the contained process (buildah run does not pass signals on), then the group.

    `proc` was started with start_new_session=True, so its process group holds the engine's
    helpers and the process inside; nothing of it is left afterwards."""
    if proc.poll() is None:
        inner = [pid for pid in group_pids(proc.pid) if not engine_process(pid)]
        for pid in inner:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
    for pid in group_pids(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait(timeout=timeout)


def engine_process(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().startswith(("buildah", "docker", "podman"))
    except OSError:
        return True  # exited: nothing to signal


def group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # the fields after the command name (in parentheses): state ppid pgrp ...
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        if int(fields[2]) == pgid:
            pids.append(int(entry.name))
    return pids


def write_service_account(kubeconfig: Path, token: str, namespace: str, path: Path) -> Path:
    """The files a pod's ServiceAccount volume holds, readable by the image's user."""
    cluster = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]
    if "certificate-authority-data" in cluster:
        import base64

        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
    else:
        ca = Path(cluster["certificate-authority"]).read_text()
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)
    for name, text in (("token", token), ("ca.crt", ca), ("namespace", namespace)):
        (path / name).write_text(text)
        (path / name).chmod(0o644)
    return path


def api_endpoint(kubeconfig: Path) -> tuple[str, str]:
    """KUBERNETES_SERVICE_HOST and _PORT that reach the API server of the kubeconfig."""
    from urllib.parse import urlsplit

    server = urlsplit(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])
    return str(server.hostname), str(server.port or 443)


class ImageOperatorRun(OperatorRun):
    """OperatorRun inside the image, as the pod runs: the container's own command line (liveness
    on loopback), its env, the config at the chart's mount path, and in-cluster credentials
    (the ServiceAccount's token and CA where a pod finds them)."""

    def __init__(
        self,
        spec: dict[str, Any],
        *,
        engine: str,
        image: str,
        kubeconfig: Path,
        token: str,
        config_file: Path,
        workdir: Path,
        pod_id: str,
        pod_namespace: str,
    ) -> None:
        super().__init__(
            spec,
            kubeconfig=kubeconfig,
            config_file=config_file,
            log_path=workdir / "operator.log",
            pod_id=pod_id,
            pod_namespace=pod_namespace,
        )
        self.argv = loopback_command(spec, self.port)
        host, port = api_endpoint(kubeconfig)
        config_dir, tmp = workdir / "config", workdir / "tmp"
        for d, mode in ((config_dir, 0o755), (tmp, 0o1777)):
            d.mkdir(parents=True, exist_ok=True)
            d.chmod(mode)
        (config_dir / "config.yaml").write_text(config_file.read_text())
        (config_dir / "config.yaml").chmod(0o644)
        sa = write_service_account(kubeconfig, token, pod_namespace, workdir / "serviceaccount")
        pod_env = {e["name"]: e["value"] for e in spec.get("env", []) if "value" in e}
        self.env = {
            **pod_env,  # VLLM_OPERATOR_CONFIG: the chart's path, /etc/vllm-operator/config.yaml
            **{k: v for k, v in self.env.items() if k.startswith("VLLM_OPERATOR_METRICS_")},
            "POD_ID": pod_id,
            "POD_NAMESPACE": pod_namespace,
            "KUBERNETES_SERVICE_HOST": host,
            "KUBERNETES_SERVICE_PORT": port,
        }
        self.container = Container(
            engine,
            image,
            volumes={"/tmp": tmp, "/etc/vllm-operator": config_dir, SERVICE_ACCOUNT_DIR: sa},
            env=self.env,
        )

    def start(self) -> None:
        self.container.__enter__()
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.container.argv(self.argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def stop(self) -> None:
        if self.proc is not None:
            stop_group(self.proc)
        self.container.__exit__(None, None, None)
