"""Template values of the ClusterIP Service in front of the replicas.

The Service is named after the VLLMService, so clients reach `http://<name>.<ns>.svc:8000`.
The name "vllm" itself is refused by a spec rule: Kubernetes would inject VLLM_PORT into every
pod of the namespace that keeps service links on, and vLLM refuses to start with it.
"""

from __future__ import annotations

from typing import Any

from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.constants import VLLM_PORT
from vllm_operator.render.labels import build_labels, build_metadata, build_selector_labels
from vllm_operator.render.pod import PORT_NAME


def build_service_values(svc: VLLMService) -> dict[str, Any]:
    return {
        "metadata": build_metadata(svc, build_labels(svc)),
        "service_type": "ClusterIP",
        "selector": build_selector_labels(svc),
        "ports": [
            {"name": PORT_NAME, "port": VLLM_PORT, "targetPort": PORT_NAME, "protocol": "TCP"}
        ],
    }
