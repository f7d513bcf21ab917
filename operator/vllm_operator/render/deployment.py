"""Template values of the Deployment that runs the vLLM server."""

from __future__ import annotations

from typing import Any, Final

from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.config import OperatorConfig
from vllm_operator.constants import LABEL_SPEC_HASH, VLLM_PORT
from vllm_operator.render.hashing import compute_spec_hash
from vllm_operator.render.labels import build_labels, build_metadata, build_selector_labels
from vllm_operator.render.placement import GPUPlacement
from vllm_operator.render.pod import (
    PORT_NAME,
    build_env,
    build_probes,
    build_resources,
    build_volumes,
)
from vllm_operator.render.rollout import (
    TERMINATION_GRACE_S,
    build_lifecycle,
    compute_rollout_strategy,
)
from vllm_operator.render.security import (
    build_container_security_context,
    build_pod_security_context,
)

CONTAINER_NAME: Final = "vllm"
# Beyond the 30 min startup budget, so a slow model load is not reported as a stalled rollout.
PROGRESS_DEADLINE_S: Final = 2400


def _container(
    spec: VLLMServiceSpec, cfg: OperatorConfig, args: list[str], placement: GPUPlacement
) -> dict[str, Any]:
    _, mounts = build_volumes(spec)
    return {
        "name": CONTAINER_NAME,
        "image": spec.image or cfg.default_image,
        "args": args,
        "ports": [{"name": PORT_NAME, "containerPort": VLLM_PORT, "protocol": "TCP"}],
        "env": build_env(spec),
        "resources": build_resources(spec, cfg.gpu_catalog.types[spec.gpu.type]),
        "securityContext": build_container_security_context(),
        "volumeMounts": mounts,
        "lifecycle": build_lifecycle(),
        **build_probes(),
    }


def build_deployment_values(
    svc: VLLMService,
    spec: VLLMServiceSpec,
    cfg: OperatorConfig,
    args: list[str],
    placement: GPUPlacement,
) -> dict[str, Any]:
    """Values for deployment.yaml.j2. `spec` is svc.spec with tuning overrides applied.

    With autoscaling on, `replicas` is None and the template omits spec.replicas: the tuner's
    field manager owns it, and a renderer apply must not reset it.

    The strategy is the one for an unknown cluster (no free GPU known); the reconcile decides
    the strategy of a rollout when it starts one, from the GPUs free then (render/rollout.py).
    """
    volumes, _ = build_volumes(spec)
    pod_spec = {
        "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
        "enableServiceLinks": False,  # no *_PORT env from Services; vLLM chokes on VLLM_PORT
        "automountServiceAccountToken": False,
        "securityContext": build_pod_security_context(),
        "nodeSelector": placement.node_selector,
        "affinity": placement.affinity,
        "tolerations": placement.tolerations,
        "container": _container(spec, cfg, args, placement),
        "volumes": volumes,
    }
    labels = build_labels(svc)
    spec_hash = compute_spec_hash({"labels": labels, "pod": pod_spec})
    autoscaled = spec.autoscaling is not None and spec.autoscaling.enabled
    return {
        "metadata": build_metadata(svc, labels),
        "replicas": None if autoscaled else spec.replicas,
        "progress_deadline_seconds": PROGRESS_DEADLINE_S,
        "selector_labels": build_selector_labels(svc),
        "strategy": compute_rollout_strategy(spec.replicas, None).strategy,
        "pod_labels": {**labels, LABEL_SPEC_HASH: spec_hash},
        "spec_hash": spec_hash,
        **pod_spec,
    }
