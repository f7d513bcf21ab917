"""Pod-level values of the vLLM server: env, volumes, probes (docs/vllm-0.33.md §4)."""

from __future__ import annotations

from typing import Any, Final

from vllm_operator.api.resources import format_cpu, format_memory
from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.catalog import GPUType
from vllm_operator.constants import VLLM_CACHE_ROOT
from vllm_operator.render.security import HF_HOME, build_home_env, build_writable_dirs
from vllm_operator.vllm.flags import API_KEY_ENV

HEALTH_PATH: Final = "/health"
PORT_NAME: Final = "http"
SHM_GIB_PER_GPU: Final = 2  # the vLLM k8s guide's 2Gi for one GPU, scaled for TP/PP workers

# /health answers only once weights are loaded and graphs captured: allow 30 min for that
# (a too short budget kills the pod mid-load with "KeyboardInterrupt: terminated").
STARTUP_PERIOD_S: Final = 10
STARTUP_FAILURES: Final = 180


def build_env(spec: VLLMServiceSpec) -> list[dict[str, Any]]:
    """Operator-set variables first, the user's after (a later duplicate name wins)."""
    env = build_home_env()
    secrets = (("HF_TOKEN", spec.hf_token_secret), (API_KEY_ENV, spec.api_key_secret))
    for name, secret in secrets:
        if secret is not None:
            ref = {"name": secret.name, "key": secret.key}
            env.append({"name": name, "valueFrom": {"secretKeyRef": ref}})
    hf_home = HF_HOME if spec.model_cache is None else spec.model_cache.mount_path
    env.append({"name": "HF_HOME", "value": hf_home})
    env.append({"name": "VLLM_CACHE_ROOT", "value": VLLM_CACHE_ROOT})
    if spec.engine is not None:
        env += [e.model_dump(by_alias=True, exclude_none=True) for e in spec.engine.env]
    return env


def build_volumes(spec: VLLMServiceSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, volumeMounts). /dev/shm is memory-backed: NCCL and vLLM's workers use it."""
    shm = f"{SHM_GIB_PER_GPU * spec.gpu.count}Gi"
    writable_volumes, writable_mounts = build_writable_dirs()
    volumes: list[dict[str, Any]] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}},
        *writable_volumes,
    ]
    mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}, *writable_mounts]
    cache = spec.model_cache
    if cache is not None:
        claim: dict[str, Any] = {"claimName": cache.pvc_name}
        mount: dict[str, Any] = {"name": "model-cache", "mountPath": cache.mount_path}
        if cache.read_only:
            claim["readOnly"] = True
            mount["readOnly"] = True
        volumes.append({"name": "model-cache", "persistentVolumeClaim": claim})
        mounts.append(mount)
    compile_cache = spec.compile_cache
    if compile_cache is not None and compile_cache.enabled:
        source: dict[str, Any] = (
            {"persistentVolumeClaim": {"claimName": compile_cache.pvc_name}}
            if compile_cache.pvc_name
            else {"emptyDir": {}}
        )
        volumes.append({"name": "compile-cache", **source})
        mounts.append({"name": "compile-cache", "mountPath": VLLM_CACHE_ROOT})
    return volumes, mounts


def build_resources(spec: VLLMServiceSpec, gpu: GPUType) -> dict[str, Any]:
    """Requests = limits for every resource: the Guaranteed QoS class. CPU and memory come from
    spec.resources, else from the catalog's per-GPU figures of spec.gpu.type."""
    given = spec.resources
    cpu = given.cpu if given is not None and given.cpu else None
    memory = given.memory if given is not None and given.memory else None
    amounts = {
        "cpu": cpu or format_cpu(gpu.cpu_per_gpu * spec.gpu.count),
        "memory": memory or format_memory(gpu.host_memory_gib_per_gpu * spec.gpu.count),
        gpu.resource_name: str(spec.gpu.count),
    }
    return {"limits": amounts, "requests": dict(amounts)}


def _http_probe(period: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": HEALTH_PATH, "port": PORT_NAME},
        "periodSeconds": period,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


def build_probes() -> dict[str, dict[str, Any]]:
    """startupProbe holds the others back until the model is loaded; then readiness takes a
    pod out of the Service within ~15 s of a dead engine, liveness restarts it after ~60 s."""
    return {
        "startupProbe": _http_probe(STARTUP_PERIOD_S, STARTUP_FAILURES),
        "readinessProbe": _http_probe(5, 3),
        "livenessProbe": _http_probe(10, 6),
    }
