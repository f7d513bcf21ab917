"""Template values of the Prometheus Operator ServiceMonitor / PodMonitor.

Both select the VLLMService's pods (or its Service) and copy the pod labels LABEL_SERVICE and
LABEL_INSTANCE onto every series (podTargetLabels), so a query can be tied to one VLLMService,
and LABEL_CANARY, so a query can split a canary pod from the stable ones (tuning/canary.py).
"""

from __future__ import annotations

from typing import Any, Final

from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.constants import LABEL_CANARY, LABEL_INSTANCE, LABEL_SERVICE
from vllm_operator.render.labels import build_labels, build_metadata, build_selector_labels
from vllm_operator.render.pod import PORT_NAME

MONITORING_API_VERSION: Final = "monitoring.coreos.com/v1"
METRICS_PATH: Final = "/metrics"
POD_TARGET_LABELS: Final = (LABEL_SERVICE, LABEL_INSTANCE, LABEL_CANARY)


def build_monitor_values(svc: VLLMService) -> dict[str, Any]:
    """Values shared by servicemonitor.yaml.j2 and podmonitor.yaml.j2."""
    monitoring = svc.spec.monitoring
    extra_labels = {} if monitoring is None else dict(monitoring.labels)
    endpoint: dict[str, Any] = {"port": PORT_NAME, "path": METRICS_PATH}
    if monitoring is not None and monitoring.interval is not None:
        endpoint["interval"] = monitoring.interval
    return {
        # The operator's labels win over user extras so the objects stay recognisable as ours.
        "metadata": build_metadata(svc, {**extra_labels, **build_labels(svc)}),
        "selector": {"matchLabels": build_selector_labels(svc)},
        "endpoints": [endpoint],
        "pod_target_labels": list(POD_TARGET_LABELS),
    }
