"""The vLLM pod's security settings: Pod Security Standards "restricted", always.

Restricted asks for runAsNonRoot, no privilege escalation, every capability dropped and the
runtime's seccomp profile. On top: a read-only root filesystem (vLLM writes only to HOME, the
caches below it and /tmp, each a volume here) and no service-account token (vLLM never talks to
the API server, so a token in the pod is only something to steal).
"""

from __future__ import annotations

from typing import Any, Final

from vllm_operator.constants import TMP_PATH, VLLM_CACHE_HOME, VLLM_HOME

# Not 0, and not a UID of the image's: the image's files are world-readable, and every path vLLM
# writes is a volume that fsGroup makes group-writable.
RUN_AS_UID: Final = 1000
RUN_AS_GID: Final = 1000
USER_NAME: Final = "vllm"  # getpass.getuser() (torch inductor's cache dir) reads USER first

HOME_VOLUME: Final = "home"
TMP_VOLUME: Final = "tmp"
HF_HOME: Final = f"{VLLM_CACHE_HOME}/huggingface"


def build_pod_security_context() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_UID,
        "runAsGroup": RUN_AS_GID,
        "fsGroup": RUN_AS_GID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def build_container_security_context() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
    }


def build_writable_dirs() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, volumeMounts) for HOME and /tmp. Not size-limited: without spec.modelCache the
    weights download into HOME, and a limit below the model's size would evict the pod."""
    volumes = [{"name": HOME_VOLUME, "emptyDir": {}}, {"name": TMP_VOLUME, "emptyDir": {}}]
    mounts = [
        {"name": HOME_VOLUME, "mountPath": VLLM_HOME},
        {"name": TMP_VOLUME, "mountPath": TMP_PATH},
    ]
    return volumes, mounts


def build_home_env() -> list[dict[str, Any]]:
    return [
        {"name": "HOME", "value": VLLM_HOME},
        {"name": "USER", "value": USER_NAME},
    ]
