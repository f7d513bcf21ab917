"""Pure rendering: (VLLMService, OperatorConfig, tuning overrides) -> child manifests."""

from vllm_operator.render.args import (
    NO_OVERRIDES,
    apply_overrides,
    build_args,
    compute_effective_budgets,
    compute_parallel_sizes,
)
from vllm_operator.render.core import RenderResult, render_all
from vllm_operator.render.errors import (
    PolicyError,
    RenderError,
    TemplateOutputError,
    UnknownGPUTypeError,
)
from vllm_operator.render.labels import build_labels, build_selector_labels, build_selector_string
from vllm_operator.render.overrides import overrides_from_status

__all__ = [
    "NO_OVERRIDES",
    "PolicyError",
    "RenderError",
    "RenderResult",
    "TemplateOutputError",
    "UnknownGPUTypeError",
    "apply_overrides",
    "build_args",
    "build_labels",
    "build_selector_labels",
    "build_selector_string",
    "compute_effective_budgets",
    "compute_parallel_sizes",
    "overrides_from_status",
    "render_all",
]
