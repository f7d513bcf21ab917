"""render/canary.py: one pod with the canary's budget, told apart from the stable pods."""

from __future__ import annotations

import pytest

from tests.unit.render_support import CFG, by_kind, svc
from vllm_operator.api.status import BudgetValues
from vllm_operator.render import RenderError
from vllm_operator.render.canary import render_canary
from vllm_operator.render.rollout import SURGE

SERVICE = svc({"spec": {"replicas": 3, "budgets": {"queue": {"maxRequests": 32}}}})


def args(dep: dict[str, object]) -> list[str]:
    return list(dep["spec"]["template"]["spec"]["containers"][0]["args"])  # type: ignore[index]


def test_the_canary_is_the_stable_deployment_with_one_budget_changed() -> None:
    stable = by_kind(SERVICE, overrides=BudgetValues(max_active_seqs=8))["Deployment"]
    canary = render_canary(SERVICE, CFG, BudgetValues(max_active_seqs=8), "maxRequests", 64)
    assert canary["metadata"]["name"] == "chat-canary"
    assert (canary["spec"]["replicas"], canary["spec"]["strategy"]) == (1, SURGE)
    selector = canary["spec"]["selector"]["matchLabels"]
    assert selector == {"serving.vllmop.io/vllmservice": "chat", "serving.vllmop.io/canary": "true"}
    labels = canary["spec"]["template"]["metadata"]["labels"]
    assert labels.items() >= selector.items()  # the Service's selector matches it too
    flags = args(canary)
    assert flags[flags.index("--max-num-queued-reqs") + 1] == "64"
    assert flags[flags.index("--max-num-active-seqs") + 1] == "8"  # the overrides in force stay
    # nothing else differs from the stable pods' flags
    stable_flags = args(stable)
    stable_flags[stable_flags.index("--max-num-queued-reqs") + 1] = "64"
    assert flags == stable_flags


def test_a_canary_value_vllm_would_refuse_is_a_render_error() -> None:
    with pytest.raises(RenderError, match="maxActiveSeqs"):
        render_canary(SERVICE, CFG, BudgetValues(max_seqs=8), "maxActiveSeqs", 16)
