"""What handlers need from the world, built once at start-up and passed through kopf's memo."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from vllm_operator.config import OperatorConfig, load_operator_config
from vllm_operator.k8s.client import Kube, KubeClient, build_api_client
from vllm_operator.metrics.prometheus import PrometheusClientLike, build_prometheus


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Deps:
    cfg: OperatorConfig
    kube: Kube
    prometheus: PrometheusClientLike | None = None
    clock: Callable[[], datetime] = field(default=utc_now)


def build_deps(env: Mapping[str, str]) -> Deps:
    cfg = load_operator_config(env)
    return Deps(
        cfg=cfg,
        kube=KubeClient(build_api_client(env.get("KUBECONFIG"))),
        prometheus=build_prometheus(cfg),
    )
