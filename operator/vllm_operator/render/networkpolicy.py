"""Template values of the optional per-VLLMService NetworkPolicy (spec.networkPolicy).

It selects the service's pods and admits ingress on the vLLM port (the API, /health, /metrics)
from pods of the listed namespaces only, matched by the `kubernetes.io/metadata.name` label the
API server sets on every namespace. Egress stays open: vLLM downloads weights at start-up. The
kubelet's probes are not subject to NetworkPolicies, so they need no rule.
"""

from __future__ import annotations

from typing import Any, Final

from vllm_operator.api.spec import NetworkPolicySpec
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.constants import VLLM_PORT
from vllm_operator.render.labels import build_labels, build_metadata, build_selector_labels

NETWORKING_API_VERSION: Final = "networking.k8s.io/v1"
NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"


def build_network_policy_values(svc: VLLMService, policy: NetworkPolicySpec) -> dict[str, Any]:
    namespaces = sorted(set(policy.from_namespaces))
    in_namespaces = {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": namespaces}
    return {
        "metadata": build_metadata(svc, build_labels(svc)),
        "pod_selector": {"matchLabels": build_selector_labels(svc)},
        "ingress": [
            {
                "from": [{"namespaceSelector": {"matchExpressions": [in_namespaces]}}],
                "ports": [{"port": VLLM_PORT, "protocol": "TCP"}],
            }
        ],
    }
