"""build_tune_plan: a decision's writes as a value, the same for the operator and the benchmark."""

from __future__ import annotations

from typing import Any

import pytest

from vllm_operator import constants as c
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.model import Action, Decision
from vllm_operator.tuning.plan import TunePlan, build_tune_plan
from vllm_operator.tuning.reasons import Reason
from vllm_operator.tuning.settings import TuningSettings

from .support import T0, snap, spec, state


def service(**patch: Any) -> VLLMService:
    meta = {"name": "chat", "namespace": "team-a", "generation": 3}
    return VLLMService(metadata=meta, spec=spec(**patch))


def plan_for(decision: Decision, svc: VLLMService | None = None) -> TunePlan:
    svc = svc or service()
    return build_tune_plan(svc, decision, snap(), T0, TuningSettings(), window="2m", conditions=[])


def made(kind: str, reason: Reason, *, applied: bool = True, to: int = 3) -> Decision:
    action = Action(kind) if kind == "Hold" else Action(kind, "replicas", 2, to)
    overrides = {"maxRequests": 64} if kind in ("SetBudget", "Rollback") else {}
    return Decision(action, reason, "why", {}, state(overrides=overrides), applied)


def test_an_applied_scale_patches_only_the_deployments_replicas() -> None:
    plan = plan_for(made("ScaleReplicas", Reason.SCALE_UP_LATENCY))
    assert plan.replicas == 3 and not plan.rerender
    assert plan.replicas_patch == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "chat", "namespace": "team-a"},
        "spec": {"replicas": 3},
    }
    assert [(e.type, e.reason, e.message) for e in plan.events] == [
        ("Normal", "ScaleUpLatency", "why")
    ]


@pytest.mark.parametrize("kind", ["SetBudget", "Rollback"])
def test_an_applied_budget_change_re_renders_with_the_new_overrides(kind: str) -> None:
    plan = plan_for(made(kind, Reason.RAISE_QUEUE_REJECTIONS))
    assert plan.rerender and plan.replicas is None
    assert plan.overrides == {"maxRequests": 64}
    assert plan.status_patch["status"]["tuning"]["overrides"] == {"maxRequests": 64}


@pytest.mark.parametrize("kind", ["ScaleReplicas", "SetBudget"])
def test_a_recommendation_writes_status_and_an_event_only(kind: str) -> None:
    plan = plan_for(made(kind, Reason.RAISE_QUEUE_REJECTIONS, applied=False))
    assert plan.replicas is None and not plan.rerender
    (event,) = plan.events
    assert event.message == "why (recommendation only)"


def test_a_hold_writes_status_and_nothing_else() -> None:
    plan = plan_for(made("Hold", Reason.WITHIN_SLO))
    assert (plan.replicas, plan.rerender, plan.events) == (None, False, ())
    patch = plan.status_patch
    assert (patch["apiVersion"], patch["kind"]) == (c.API_VERSION, c.KIND)
    assert patch["metadata"] == {"name": "chat", "namespace": "team-a"}
    assert set(patch["status"]) == {"tuning", "metrics", "conditions"}
    (cond,) = patch["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        c.COND_TUNING_ACTIVE,
        "True",
        "WithinSLO",
    )
    assert cond["observedGeneration"] == 3
    assert patch["status"]["metrics"]["window"] == "2m"
    record = patch["status"]["tuning"]["lastDecisions"][-1]
    assert (record["action"], record["reason"]) == ("Hold", "WithinSLO")


def test_the_status_patch_is_plain_json_on_the_wire() -> None:
    # Reason is a StrEnum: what leaves the plan must be plain strings, like before it existed
    plan = plan_for(made("ScaleReplicas", Reason.SCALE_UP_LATENCY))
    cond = plan.status_patch["status"]["conditions"][0]
    assert type(cond["reason"]) is str and type(plan.events[0].reason) is str
    assert type(plan.status_patch["status"]["tuning"]["lastDecisions"][-1]["reason"]) is str


def test_a_real_decision_plans_what_it_says() -> None:
    # 503s over budget with TTFT at its SLO: rule 2 scales 2 -> 3
    busy = snap(rejection_rate=1.0, rejection_ratio=0.1, ttft_p95=0.5)
    decision = decide(spec(), busy, state(), T0)
    assert decision.reason == Reason.SCALE_UP_REJECTIONS
    plan = plan_for(decision)
    assert plan.replicas == decision.action.to_value == 3


def completing(decision: Decision, applied: int | None) -> TunePlan:
    return build_tune_plan(
        service(), decision, snap(), T0, TuningSettings(), window="2m", conditions=[],
        applied_replicas=applied,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "applied", "patched"),
    [
        ("Hold", 2, 4),  # recorded 4, the Deployment at 2: the pass that recorded it died
        ("Hold", 4, None),  # in force already
        ("Hold", None, None),  # not the tuner's count (not handed over, no Deployment)
        ("ScaleReplicas", 2, 3),  # a decided step is the count
        ("ScaleReplicas", 3, 3),  # applied even where it stands: the decision says so
    ],
)
def test_the_recorded_count_is_applied_where_the_deployment_lacks_it(
    kind: str, applied: int | None, patched: int | None
) -> None:
    action = Action(kind) if kind == "Hold" else Action(kind, "replicas", 4, 3)
    remembered = state(desired_replicas=4 if kind == "Hold" else 3)
    plan = completing(Decision(action, Reason.WITHIN_SLO, "why", {}, remembered), applied)
    assert plan.replicas == patched
