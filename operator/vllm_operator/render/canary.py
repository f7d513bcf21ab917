"""The canary Deployment: one pod with a budget change, beside the stable pods (pure).

It is the service's Deployment rendered with the canary's budget on top of the overrides in
force, renamed `<name>-canary`, one replica, and labelled LABEL_CANARY "true" on its pods and in
its selector. Its pods keep LABEL_SERVICE, so the Service sends them their share of the traffic
and the monitors scrape them; the canary label (in podTargetLabels) lets the queries tell the
two apart. The stable Deployment's selector matches the canary's pods too, which Kubernetes
allows: each ReplicaSet belongs to its Deployment by controller reference, and the canary label
keeps the two pod templates, hence their pod-template-hash, apart. docs/rollouts.md §5.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from vllm_operator.api.budgets import BUDGETS_BY_KEY, BudgetKey
from vllm_operator.api.status import BudgetValues
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.config import OperatorConfig
from vllm_operator.constants import LABEL_CANARY
from vllm_operator.render.core import render_all
from vllm_operator.render.rollout import SURGE

CANARY_SUFFIX: Final = "-canary"


def canary_name(name: str) -> str:
    return f"{name}{CANARY_SUFFIX}"


def render_canary(
    svc: VLLMService,
    cfg: OperatorConfig,
    overrides: BudgetValues,
    field: BudgetKey,
    value: int,
) -> dict[str, Any]:
    """The canary Deployment for `field` = `value` over `overrides` (the stable pods' own).

    Raises what render_all raises (a budget vLLM would refuse is a RenderError).
    """
    with_canary = overrides.model_copy(update={BUDGETS_BY_KEY[field].attr: value})
    rendered = render_all(svc, cfg, with_canary).manifests
    dep = copy.deepcopy(next(m for m in rendered if m["kind"] == "Deployment"))
    dep["metadata"]["name"] = canary_name(svc.name)
    dep["metadata"]["labels"][LABEL_CANARY] = "true"
    spec = dep["spec"]
    spec["replicas"] = 1
    spec["strategy"] = dict(SURGE)
    spec["selector"]["matchLabels"][LABEL_CANARY] = "true"
    spec["template"]["metadata"]["labels"][LABEL_CANARY] = "true"
    return dict(dep)
