"""The harness loop: keep one healthy twin per Running vLLM pod, and the balancers in step.

A twin that exits is restarted for the same pod, as a kubelet restarts a container under
restartPolicy Always: fresh process, fresh counters (a counter reset to Prometheus), after a
CrashLoopBackOff-style delay (0.5 s doubling to 10 s) so a twin that cannot start does not spin.
Meanwhile the pod says so, as a kubelet's would: not Ready, its container waiting in
CrashLoopBackOff, until the new twin answers /health.

A pod that is deleted leaves its balancer's ready set at once (the endpoints' part), then its
twin stops as a kubelet stops a container: the preStop sleep, SIGTERM (the twin drains as vLLM
does), SIGKILL once the grace period is over. Stops run in the background, so one draining twin
holds up no other pod's start. During its preStop sleep a terminating twin still takes requests
when its service has no ready twin, as kube-proxy falls back to serving terminating endpoints
(KEP-1669): kwok reports a new pod Ready before its twin answers, so without this fallback a
surge rollout would show a gap that a real readiness probe never lets happen.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, ClientTimeout
from kubernetes.client.exceptions import ApiException

from vllm_operator import constants as c
from vllm_operator.catalog import GPUCatalog
from vllm_operator.k8s.client import KubeClient, NotFoundError
from vllm_twin.harness.balancer import Balancer
from vllm_twin.harness.targets import (
    balancer_keys,
    build_pod_status,
    build_sd_target,
    build_twin_command,
    gpu_type_for_node,
    is_running,
    restart_delay,
    service_key,
    termination_times,
)

log = logging.getLogger("vllm_twin.harness")
FM = "vllm-twin-harness"  # field manager of the pod status the harness writes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Twin:
    pod: dict[str, Any]
    key: str
    port: int
    proc: asyncio.subprocess.Process
    log_path: Path
    ready: bool = False
    exit_code: int | None = None
    restarts: int = 0  # how many twins ran for this pod before this one
    exited_at: float | None = None  # time.monotonic() of the exit

    def restart_due(self, now: float) -> bool:
        """Exited, and the back-off since the exit has passed (0.5 s doubling to 10 s)."""
        if self.exited_at is None:
            return False
        return now - self.exited_at >= restart_delay(self.restarts)

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class TwinKubelet:
    kube: KubeClient
    catalog: GPUCatalog
    targets_dir: Path
    state_file: Path
    log_dir: Path
    time_scale: float = 1.0
    namespaces: tuple[str, ...] = ()  # empty: every namespace
    twins: dict[str, Twin] = field(default_factory=dict)  # pod uid -> twin
    balancers: dict[str, Balancer] = field(default_factory=dict)
    stopping: set[asyncio.Task[None]] = field(default_factory=set)
    terminating: dict[str, Twin] = field(default_factory=dict)  # pod name -> twin in preStop
    _http: ClientSession | None = None

    async def run(self, stop: asyncio.Event, interval: float = 0.5) -> None:
        self._http = ClientSession(timeout=ClientTimeout(total=1))
        try:
            while not stop.is_set():
                try:
                    await self.sync_once()
                except Exception:  # the API may blip; the next round retries from scratch
                    log.exception("harness sync failed")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=interval)
        finally:
            await self.shutdown()

    async def _list_managed(self, kind: str) -> list[dict[str, Any]]:
        selector = f"{c.LABEL_MANAGED_BY}={c.MANAGED_BY}"
        if not self.namespaces:
            return await asyncio.to_thread(self.kube.list, "v1", kind, None, selector)
        out: list[dict[str, Any]] = []
        for ns in self.namespaces:
            out += await asyncio.to_thread(self.kube.list, "v1", kind, ns, selector)
        return out

    async def sync_once(self) -> None:
        pods = await self._list_managed("Pod")
        services = await self._list_managed("Service")
        nodes = await asyncio.to_thread(self.kube.list, "v1", "Node", None)
        node_labels = {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in nodes}
        wanted = {p["metadata"]["uid"]: p for p in pods if is_running(p) and service_key(p)}
        gone = [self.twins.pop(uid) for uid in list(self.twins) if uid not in wanted]
        if gone:  # out of the balancers first, as endpoints drop a terminating pod
            await self._sync_balancers(balancer_keys(services, wanted.values()))
        for twin in gone:
            task = asyncio.create_task(self._stop_twin(twin), name=f"stop-{twin.name}")
            self.stopping.add(task)
            task.add_done_callback(self.stopping.discard)
        now = time.monotonic()
        for uid, pod in wanted.items():
            old = self.twins.get(uid)
            if old is None or old.restart_due(now):
                labels = node_labels.get(pod["spec"].get("nodeName", ""), {})
                # the same port: Prometheus sees the same series, its counters reset
                port = free_port() if old is None else old.port
                twin = await self._start_twin(pod, gpu_type_for_node(labels, self.catalog), port)
                twin.restarts = 0 if old is None else old.restarts + 1
                self.twins[uid] = twin
        for twin in self.twins.values():
            await self._check(twin)
        await self._sync_balancers(balancer_keys(services, wanted.values()))
        self._write_state()

    async def _start_twin(self, pod: dict[str, Any], gpu_type: str | None, port: int) -> Twin:
        argv, env = build_twin_command(
            pod, port=port, gpu_type=gpu_type, time_scale=self.time_scale
        )
        meta = pod["metadata"]
        log_path = self.log_dir / f"{meta['namespace']}_{meta['name']}.log"
        with log_path.open("ab") as out:
            proc = await asyncio.create_subprocess_exec(
                *argv, env={**os.environ, **env}, stdout=out, stderr=asyncio.subprocess.STDOUT
            )
        log.info("twin for %s/%s on port %d: %s", meta["namespace"], meta["name"], port, argv[4:])
        return Twin(pod=pod, key=service_key(pod) or "", port=port, proc=proc, log_path=log_path)

    async def _check(self, twin: Twin) -> None:
        if twin.exit_code is not None:
            return
        if twin.proc.returncode is not None:
            twin.exit_code = twin.proc.returncode
            twin.exited_at = time.monotonic()
            twin.ready = False
            self._target_path(twin).unlink(missing_ok=True)
            log.warning("twin %s exited with %s; see %s", twin.name, twin.exit_code, twin.log_path)
            await self._report(twin, up=False, restarts=twin.restarts + 1)
            return
        if twin.ready or self._http is None:
            return
        try:
            async with self._http.get(twin.url + "/health") as resp:
                twin.ready = resp.status == 200
        except (OSError, TimeoutError):
            return
        if twin.ready:
            path = self._target_path(twin)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(build_sd_target(twin.pod, twin.port)))
            tmp.rename(path)  # Prometheus must never read half a file
            if twin.restarts:  # kwok made the pod Ready at first; a restart is ours to report
                await self._report(twin, up=True, restarts=twin.restarts)

    async def _report(self, twin: Twin, *, up: bool, restarts: int) -> None:
        """Write the pod's readiness and container state, as the kubelet would; a pod deleted
        meanwhile is not an error (the next round stops its twin)."""
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = build_pod_status(
            twin.pod, up=up, restarts=restarts, exit_code=twin.exit_code, now=now
        )
        try:
            await asyncio.to_thread(self.kube.apply, body, field_manager=FM, subresource="status")
        except (ApiException, NotFoundError) as exc:
            log.warning("pod %s status not written: %s", twin.name, exc)

    async def _stop_twin(self, twin: Twin, *, hook: bool = True) -> None:
        self._target_path(twin).unlink(missing_ok=True)
        if twin.proc.returncode is not None:
            return
        pre_stop, grace = termination_times(twin.pod, self.time_scale)
        pre_stop = pre_stop if hook else 0.0
        start = time.monotonic()
        if pre_stop > 0:
            self.terminating[twin.name] = twin
            self._refresh_backends()
            with contextlib.suppress(TimeoutError):  # the hook's sleep; a twin that dies ends it
                await asyncio.wait_for(twin.proc.wait(), timeout=pre_stop)
            self.terminating.pop(twin.name, None)
            self._refresh_backends()
        if twin.proc.returncode is None:
            twin.proc.send_signal(signal.SIGTERM)
        try:
            left = max(0.0, grace - (time.monotonic() - start))
            await asyncio.wait_for(twin.proc.wait(), timeout=left)
        except TimeoutError:
            log.warning("twin %s outlived its grace period (%.0fs): killed", twin.name, grace)
            twin.proc.kill()
            await twin.proc.wait()

    async def _sync_balancers(self, keys: set[str]) -> None:
        for key in list(self.balancers):
            if key not in keys:
                await self.balancers.pop(key).stop()
                log.info("balancer for %s stopped: its Service and pods are gone", key)
        for key in sorted(keys):
            if key not in self.balancers:
                self.balancers[key] = Balancer(key)
                url = await self.balancers[key].start()
                log.info("balancer for %s on %s", key, url)
        self._refresh_backends()

    def _refresh_backends(self) -> None:
        for key, balancer in self.balancers.items():
            ready = {t.name: t.url for t in self.twins.values() if t.key == key and t.ready}
            serving = {t.name: t.url for t in self.terminating.values() if t.key == key and t.ready}
            balancer.set_backends(ready, terminating=serving)

    def _target_path(self, twin: Twin) -> Path:
        meta = twin.pod["metadata"]
        return self.targets_dir / f"twin_{meta['namespace']}_{meta['name']}.json"

    def _write_state(self) -> None:
        services: dict[str, Any] = {}
        for key, lb in self.balancers.items():
            services[key] = {"url": lb.url, "twins": {}}
        for twin in self.twins.values():
            entry = services.setdefault(twin.key, {"url": None, "twins": {}})
            entry["twins"][twin.name] = {
                "url": twin.url,
                "ready": twin.ready,
                "exitCode": twin.exit_code,
                "pid": twin.proc.pid,
                "restarts": twin.restarts,
                "args": build_twin_command(twin.pod, port=twin.port, gpu_type=None, time_scale=1)[
                    0
                ][4:],
                "log": str(twin.log_path),
            }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"services": services}, indent=2, sort_keys=True))
        tmp.rename(self.state_file)

    async def shutdown(self) -> None:
        # the harness itself goes: no endpoints to wait for, only the twins' drains
        stops = [self._stop_twin(twin, hook=False) for twin in self.twins.values()]
        await asyncio.gather(*stops, *self.stopping)
        self.twins.clear()
        for lb in self.balancers.values():
            await lb.stop()
        self.balancers.clear()
        if self._http:
            await self._http.close()
        self._write_state()
