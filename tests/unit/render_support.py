"""What the renderer's unit tests share: a base VLLMService, the default config, helpers."""

from __future__ import annotations

from typing import Any

from tests.fixtures.specs.cases import merge_patch
from vllm_operator.api.errors import parse_vllmservice
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.config import OperatorConfig, load_operator_config
from vllm_operator.render import render_all

CFG = load_operator_config({})
BASE: dict[str, Any] = {
    "apiVersion": "serving.vllmop.io/v1alpha1",
    "kind": "VLLMService",
    "metadata": {"name": "chat", "namespace": "llm"},
    "spec": {"model": "Qwen/Qwen2.5-7B-Instruct", "gpu": {"type": "H100-80GB"}},
}


def svc(patch: dict[str, Any] | None = None) -> VLLMService:
    return parse_vllmservice(merge_patch(BASE, patch or {}))


def by_kind(s: VLLMService, cfg: OperatorConfig = CFG, **kw: Any) -> dict[str, dict[str, Any]]:
    return {m["kind"]: m for m in render_all(s, cfg, **kw).manifests}


def pod(s: VLLMService, **kw: Any) -> dict[str, Any]:
    spec: dict[str, Any] = by_kind(s, **kw)["Deployment"]["spec"]["template"]["spec"]
    return spec


def container(s: VLLMService) -> dict[str, Any]:
    (only,) = pod(s)["containers"]
    return dict(only)
