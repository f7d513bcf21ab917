"""render_all: (VLLMService, OperatorConfig, tuning overrides) -> child manifests. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vllm_operator.api.policy import find_policy_violations
from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.api.status import BudgetValues, EffectiveStatus
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.config import OperatorConfig
from vllm_operator.render.args import (
    NO_OVERRIDES,
    apply_overrides,
    build_args,
    compute_effective_budgets,
    compute_parallel_sizes,
)
from vllm_operator.render.deployment import build_deployment_values
from vllm_operator.render.errors import PolicyError
from vllm_operator.render.hardware import check_hardware_defaults
from vllm_operator.render.model_start import check_model_start
from vllm_operator.render.monitoring import MONITORING_API_VERSION, build_monitor_values
from vllm_operator.render.networkpolicy import (
    NETWORKING_API_VERSION,
    build_network_policy_values,
)
from vllm_operator.render.placement import compute_gpu_placement
from vllm_operator.render.service import build_service_values
from vllm_operator.render.templates import render_manifest
from vllm_operator.sim.catalog import packaged_catalog
from vllm_operator.vllm.env import unknown_variables


@dataclass(frozen=True)
class RenderResult:
    """Manifests in apply order, what status.effective reports about them, and warnings."""

    manifests: list[dict[str, Any]]
    effective: EffectiveStatus
    warnings: list[str] = field(default_factory=list)

    def effective_status(self) -> dict[str, Any]:
        """status.effective as the wire dict (camelCase, unset fields left out)."""
        return self.effective.model_dump(by_alias=True, exclude_none=True, mode="json")


def compute_warnings(spec: VLLMServiceSpec) -> list[str]:
    """Legal but probably unintended settings; shown by the CLI, reportable as events."""
    warnings = []
    monitoring = spec.monitoring
    if monitoring is not None and monitoring.service_monitor and monitoring.pod_monitor:
        warnings.append(
            "spec.monitoring: serviceMonitor and podMonitor are both on; "
            "Prometheus will scrape every pod twice"
        )
    tuning = spec.autotune is not None and spec.autotune.mode != "Off"
    scaling = spec.autoscaling is not None and spec.autoscaling.enabled
    if (tuning or scaling) and spec.slo is None:
        warnings.append("spec.slo is empty: autotune and autoscaling have no target to steer to")
    env = [] if spec.engine is None else spec.engine.env
    for name in unknown_variables(dict.fromkeys(var.name for var in env)):
        index = next(i for i, var in enumerate(env) if var.name == name)
        warnings.append(
            f"spec.engine.env[{index}]: {name} is not one of vLLM 0.33's environment variables, "
            "so it changes nothing (vLLM only logs it); check the spelling"
        )
    extra = [] if spec.engine is None else spec.engine.extra_args
    if (tuning or scaling) and any(a.replace("_", "-") == "--disable-log-stats" for a in extra):
        warnings.append(
            "spec.engine.extraArgs: --disable-log-stats turns off the metrics "
            "that autotune and autoscaling read"
        )
    return warnings


def render_all(
    svc: VLLMService, cfg: OperatorConfig, overrides: BudgetValues = NO_OVERRIDES
) -> RenderResult:
    """Every child manifest of `svc` (Deployment, Service, monitors, NetworkPolicy) in apply
    order, with what the pods run (status.effective: args, image, budgets, parallelism and the
    spec hash).

    One pass computes each value once, so status reports exactly what was rendered. Raises
    PolicyError (a setting cfg.policy denies), UnknownGPUTypeError (spec.gpu.type not in
    cfg.gpu_catalog) and other RenderErrors, each naming the field to fix.
    """
    spec = apply_overrides(svc.spec, overrides)
    violations = find_policy_violations(spec, cfg.policy, spec.image or cfg.default_image)
    if violations:
        raise PolicyError(violations)
    placement = compute_gpu_placement(spec.gpu, cfg.gpu_catalog)
    check_hardware_defaults(spec, cfg.gpu_catalog)
    args = build_args(spec)
    check_model_start(spec, packaged_catalog())
    templates = cfg.template_dir
    deployment = build_deployment_values(svc, spec, cfg, args, placement)
    manifests = [
        render_manifest(
            "deployment.yaml.j2",
            deployment,
            api_version="apps/v1",
            kind="Deployment",
            template_dir=templates,
        ),
        render_manifest(
            "service.yaml.j2",
            build_service_values(svc),
            api_version="v1",
            kind="Service",
            template_dir=templates,
        ),
    ]
    monitoring = spec.monitoring
    for enabled, kind in (
        (monitoring is not None and monitoring.service_monitor, "ServiceMonitor"),
        (monitoring is not None and monitoring.pod_monitor, "PodMonitor"),
    ):
        if enabled:
            manifests.append(
                render_manifest(
                    f"{kind.lower()}.yaml.j2",
                    build_monitor_values(svc),
                    api_version=MONITORING_API_VERSION,
                    kind=kind,
                    template_dir=templates,
                )
            )
    if spec.network_policy is not None:
        manifests.append(
            render_manifest(
                "networkpolicy.yaml.j2",
                build_network_policy_values(svc, spec.network_policy),
                api_version=NETWORKING_API_VERSION,
                kind="NetworkPolicy",
                template_dir=templates,
            )
        )
    tp, pp = compute_parallel_sizes(spec)
    effective = EffectiveStatus(
        args=args,
        image=deployment["container"]["image"],
        budgets=compute_effective_budgets(spec),
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        spec_hash=deployment["spec_hash"],
    )
    return RenderResult(manifests=manifests, effective=effective, warnings=compute_warnings(spec))
