"""Which tuning overrides are in force for a VLLMService, read back from its status."""

from __future__ import annotations

from vllm_operator.api.status import BudgetValues
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.render.args import NO_OVERRIDES

__all__ = ["NO_OVERRIDES", "overrides_from_status"]


def overrides_from_status(svc: VLLMService) -> BudgetValues:
    """Budget overrides recorded in status.tuning.overrides, honoured only in autotune mode Auto.

    Recommend mode never changes pods, and switching autotune Off returns the pods to the spec's
    own budgets. Replicas are never overridden: with autoscaling on the renderer leaves
    spec.replicas to the tuner's field manager, and with it off spec.replicas rules.
    """
    autotune = svc.spec.autotune
    tuning = None if svc.status is None else svc.status.tuning
    if autotune is None or autotune.mode != "Auto" or tuning is None or tuning.overrides is None:
        return NO_OVERRIDES
    return tuning.overrides
