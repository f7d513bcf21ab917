"""Why a VLLMService cannot be rendered. Each error names the spec field to fix."""

from __future__ import annotations

from vllm_operator.api.policy import Violation


class RenderError(ValueError):
    """The spec is valid, but cannot be turned into manifests with this operator config."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class UnknownGPUTypeError(RenderError):
    """A GPU type is not in the operator's catalog (operator config, so not a schema error)."""

    def __init__(self, field: str, gpu_type: str, known: tuple[str, ...]) -> None:
        super().__init__(field, f"unknown GPU type {gpu_type!r}; known types: {', '.join(known)}")
        self.gpu_type = gpu_type
        self.known = known


class TemplateOutputError(RenderError):
    """A manifest template produced something that is not the expected manifest."""


class PolicyError(RenderError):
    """The spec is valid, but the operator's policy (operator config `policy`) refuses it."""

    def __init__(self, violations: list[Violation]) -> None:
        first, rest = violations[0], violations[1:]
        more = f" (and {len(rest)} more: {', '.join(v.field for v in rest)})" if rest else ""
        super().__init__(first.field, first.message + more)
        self.violations = violations
