"""Pure pieces of the harness: pod -> twin command line, Prometheus target, GPU type."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from vllm_operator import constants as c
from vllm_operator.catalog import GPUCatalog

_OWN_FLAGS = ("--host", "--port")


def prometheus_label_name(kube_label: str) -> str:
    """How the Prometheus Operator turns a pod label into a target label (podTargetLabels)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", kube_label)


def vllm_container(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    containers = pod["spec"]["containers"]
    return next((x for x in containers if x.get("name") == "vllm"), containers[0])


def strip_listen_flags(args: list[str]) -> list[str]:
    """Drop --host/--port (both spellings): the twin listens where the harness says."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0].replace("_", "-")
        if name in _OWN_FLAGS:
            skip = "=" not in arg
            continue
        out.append(arg)
    return out


def gpu_type_for_node(node_labels: Mapping[str, str], catalog: GPUCatalog) -> str | None:
    """The catalog type whose node labels all match this node's labels."""
    for name in catalog.known():
        gpu = catalog.types[name]
        if all(node_labels.get(k) == v for k, v in gpu.node_labels.items()):
            return name
    return None


def build_twin_command(
    pod: Mapping[str, Any], *, port: int, gpu_type: str | None, time_scale: float
) -> tuple[list[str], dict[str, str]]:
    container = vllm_container(pod)
    args = strip_listen_flags(list(container.get("args") or []))
    argv = [sys.executable, "-m", "vllm_twin.cli", "twin", *args]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    # Only literal values travel: secrets are not the harness's to read.
    env = {e["name"]: str(e["value"]) for e in container.get("env") or [] if "value" in e}
    env["VLLM_TWIN_TIME_SCALE"] = str(time_scale)
    if gpu_type:
        env["VLLM_TWIN_GPU"] = gpu_type
    return argv, env


def build_sd_target(pod: Mapping[str, Any], port: int) -> list[dict[str, Any]]:
    """One file-SD entry, labelled as a PodMonitor with podTargetLabels would label the series."""
    meta = pod["metadata"]
    labels = {
        "namespace": meta["namespace"],
        "pod": meta["name"],
        "container": vllm_container(pod).get("name", "vllm"),
        "endpoint": "http",
    }
    for key in (c.LABEL_SERVICE, c.LABEL_INSTANCE, c.LABEL_CANARY):
        if key in (meta.get("labels") or {}):
            labels[prometheus_label_name(key)] = meta["labels"][key]
    return [{"targets": [f"127.0.0.1:{port}"], "labels": labels}]


def service_key(obj: Mapping[str, Any]) -> str | None:
    """The "namespace/name" of the VLLMService that a rendered pod or Service belongs to."""
    meta = obj["metadata"]
    name = (meta.get("labels") or {}).get(c.LABEL_SERVICE)
    return f"{meta['namespace']}/{name}" if name else None


def balancer_keys(
    services: Iterable[Mapping[str, Any]], running_pods: Iterable[Mapping[str, Any]]
) -> set[str]:
    """The VLLMServices that need a balancer now.

    A balancer plays the ClusterIP, whose address lives as long as the Service object: a rollout
    with maxSurge 0 leaves no Running pod for a moment, and a balancer dropped then would come
    back on another port while clients still hold the old one. Pods count too, for a pod whose
    Service is not there (yet).
    """
    live = (s for s in services if not s["metadata"].get("deletionTimestamp"))
    keys = {service_key(o) for o in (*live, *running_pods)}
    return {k for k in keys if k}


def is_running(pod: Mapping[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") == "Running" and not pod["metadata"].get(
        "deletionTimestamp"
    )


def build_pod_status(
    pod: Mapping[str, Any], *, up: bool, restarts: int, exit_code: int | None, now: str
) -> dict[str, Any]:
    """The status a kubelet writes for a pod whose vLLM container restarts: ready and running
    again, or (`up` False) not ready and waiting in CrashLoopBackOff after it exited. kwok writes
    a pod's status only while it is Pending, so these stay (a server-side apply of status)."""
    meta = pod["metadata"]
    flag = "True" if up else "False"
    container = vllm_container(pod)
    state: dict[str, Any] = (
        {"running": {"startedAt": now}}
        if up
        else {
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off restarting failed container {container['name']}",
            }
        }
    )
    entry: dict[str, Any] = {
        "name": container["name"],
        "image": container.get("image", ""),
        "imageID": "",
        "ready": up,
        "started": up,
        "restartCount": restarts,
        "state": state,
    }
    if exit_code is not None:
        # a container runtime reports death by signal N as exit code 128 + N (SIGKILL: 137)
        code = 128 - exit_code if exit_code < 0 else exit_code
        entry["lastState"] = {"terminated": {"exitCode": code, "finishedAt": now}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        "status": {
            "conditions": [
                {"type": t, "status": flag, "lastTransitionTime": now}
                for t in ("Ready", "ContainersReady")
            ],
            "containerStatuses": [entry],
        },
    }


def termination_times(pod: Mapping[str, Any], time_scale: float) -> tuple[float, float]:
    """(preStop sleep, grace period) in wall seconds on the twins' time scale, as a kubelet
    reads them from the pod: the grace period counts from the start of the preStop hook, and a
    pod that sets none gets Kubernetes' 30 s."""
    hook = (vllm_container(pod).get("lifecycle") or {}).get("preStop") or {}
    sleep = float((hook.get("sleep") or {}).get("seconds", 0))
    grace = float(pod["spec"].get("terminationGracePeriodSeconds", 30))
    return sleep / time_scale, grace / time_scale


def restart_delay(restarts: int) -> float:
    """Seconds before a twin that exited is started again, after `restarts` earlier restarts:
    0.5 doubling to 10, the kubelet's CrashLoopBackOff shape on a test's time scale."""
    return min(10.0, 0.5 * 2.0 ** min(restarts, 5))
