"""A configuration the planner may recommend, its SLO target, and the VLLMService it becomes.

A candidate is validated exactly as the cluster would see it: the VLLMService is parsed by the
API model (the CRD's schema and cross-field rules, api/errors.py), rendered by the renderer
(which refuses budgets vLLM would reject against its per-GPU defaults) and resolved by the engine
model (vLLM's start-up checks: a request must fit the KV cache, the model must fit the GPU).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from vllm_operator.api.budgets import BUDGET_FIELDS
from vllm_operator.api.errors import InvalidSpecError, parse_vllmservice
from vllm_operator.config import OperatorConfig
from vllm_operator.render import RenderError, render_all
from vllm_operator.sim.catalog import Catalog
from vllm_operator.sim.engine import EngineConfig, ResolvedConfig, resolve_config

BUDGET_DESTS = tuple(f.dest for f in BUDGET_FIELDS)
_OPERATOR_CONFIG = OperatorConfig()


@dataclass(frozen=True)
class Target:
    """The SLO, and the share of it a recommendation must keep in hand (`margin`)."""

    ttft: float  # seconds, p95
    itl: float | None = None  # seconds, p95 over every inter-token gap
    max_rejection: float = 0.01  # 503 share
    margin: float = 0.1

    def limits(self, margin: float | None = None) -> tuple[float, float | None, float]:
        keep = 1 - (self.margin if margin is None else margin)
        itl = None if self.itl is None else self.itl * keep
        return self.ttft * keep, itl, self.max_rejection * keep


@dataclass(frozen=True)
class Candidate:
    """GPU type, replica count and the flags set (budgets by vLLM dest name; unset = default)."""

    gpu: str
    replicas: int
    tp: int = 1
    budgets: tuple[tuple[str, int], ...] = ()  # sorted (dest, value) pairs
    max_model_len: int | None = None

    def __post_init__(self) -> None:
        unknown = {dest for dest, _ in self.budgets} - set(BUDGET_DESTS)
        if unknown:
            raise ValueError(f"not a budget flag: {', '.join(sorted(unknown))}")

    def budget(self, dest: str) -> int | None:
        return dict(self.budgets).get(dest)

    def with_budgets(self, **values: int | None) -> Candidate:
        merged = dict(self.budgets)
        for dest, value in values.items():
            if value is None:
                merged.pop(dest, None)
            else:
                merged[dest] = int(value)
        return replace(self, budgets=tuple(sorted(merged.items())))

    def engine_config(self) -> EngineConfig:
        config = EngineConfig(max_model_len=self.max_model_len, tensor_parallel_size=self.tp)
        budgets: dict[str, Any] = dict(self.budgets)  # dest names are EngineConfig fields
        return replace(config, **budgets)

    @property
    def gpus(self) -> int:
        return self.replicas * self.tp


def service_name(model: str) -> str:
    """A DNS label from a model id: `org/Llama-3.1-8B-Instruct` -> `llama-3-1-8b-instruct`."""
    name = re.sub(r"[^a-z0-9]+", "-", model.rsplit("/", 1)[-1].lower()).strip("-")
    return name[:63].strip("-") or "vllm"


def build_service(
    c: Candidate,
    *,
    model: str,
    name: str,
    namespace: str | None,
    target: Target,
    autoscaling: tuple[int, int] | None = None,
    bounds: dict[str, tuple[int, int]] | None = None,
) -> dict[str, Any]:
    """The VLLMService manifest of a candidate (wire names); `bounds` by budget dest."""
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    spec: dict[str, Any] = {
        "model": model,
        "replicas": c.replicas,
        "gpu": {"type": c.gpu, "count": c.tp},
    }
    budgets: dict[str, dict[str, int]] = {}
    for f in BUDGET_FIELDS:
        value = c.budget(f.dest)
        if value is not None:
            budgets.setdefault(f.group, {})[f.key] = value
    if budgets:
        spec["budgets"] = budgets
    if c.max_model_len is not None:
        spec["engine"] = {"maxModelLen": c.max_model_len}
    slo: dict[str, Any] = {"ttftP95": _ms(target.ttft), "maxRejectionRatio": target.max_rejection}
    if target.itl is not None:
        slo["itlP95"] = _ms(target.itl)
    spec["slo"] = slo
    if autoscaling is not None:
        low, high = autoscaling
        spec["autoscaling"] = {"enabled": True, "minReplicas": low, "maxReplicas": high}
    if bounds:
        by_dest = {f.dest: f for f in BUDGET_FIELDS}
        spec["autotune"] = {
            "mode": "Recommend",
            "bounds": {by_dest[d].key: {"min": lo, "max": hi} for d, (lo, hi) in bounds.items()},
        }
    return {
        "apiVersion": "serving.vllmop.io/v1alpha1",
        "kind": "VLLMService",
        "metadata": metadata,
        "spec": spec,
    }


def _ms(seconds: float) -> str:
    millis = seconds * 1000
    return f"{millis:.0f}ms" if abs(millis - round(millis)) < 1e-9 else f"{millis:.3f}ms"


def check_service(manifest: dict[str, Any]) -> str | None:
    """Why the API server or the renderer would refuse `manifest`; None when both accept it."""
    try:
        render_all(parse_vllmservice(manifest), _OPERATOR_CONFIG)
    except InvalidSpecError as exc:
        return "; ".join(exc.messages)
    except RenderError as exc:
        return str(exc)
    return None


def resolve(c: Candidate, catalog: Catalog, model: str) -> ResolvedConfig:
    """What vLLM would run for `c`; ValueError with vLLM's start-up message if it refuses."""
    return resolve_config(
        c.engine_config(), catalog.gpu(c.gpu), catalog.model(model), catalog.coefficients
    )
