"""The premises of the fault tests' services, pinned where they are cheap to check: the steady
service of the Prometheus-restart fault test (tests/faults/test_tuning.py) must give the tuner
nothing to do, so that any move on the cluster is the fault's. A change to the model or to rule
9b that would move it fails here, in a second, rather than on the cluster tier an hour later."""

from __future__ import annotations

from typing import Any

from tests.faults.specs import STEADY, STEADY_LOAD, tuned_spec
from tests.unit.tuning.support import T0, snap, watched
from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.inputs import Inputs
from vllm_operator.tuning.model import FleetView, MetricsSnapshot
from vllm_operator.tuning.retune_pods import compute_fewer_pods
from vllm_operator.tuning.settings import TuningSettings

ITL = 0.01  # s: a 7B model on an H100 at one running sequence, well inside the 100 ms SLO
SPARE = 2  # maxReplicas 3 over the one pod


def steady_figures() -> MetricsSnapshot:
    """One pod serving STEADY_LOAD well within its SLO, as the tuner reads it."""
    rate, out = STEADY_LOAD["rate"], STEADY_LOAD["output"]
    return snap(
        request_rate=rate,
        admitted_rate=rate,
        running=rate * out * ITL,  # Little's law over the decode time
        itl_p95=ITL,
        ttft_p95=0.1,
        e2e_p95=0.1 + out * ITL,
        prompt_tokens_per_request=float(STEADY_LOAD["prompt"]),
        pods_expected=1,
        pods_scraped=1,
        fleet=FleetView(desired=1, ready=1, updated=1, rolling=False),
    )


def steady_inputs(**spec: Any) -> Inputs:
    service = VLLMServiceSpec.model_validate(tuned_spec(**{**STEADY, **spec}))
    rate = STEADY_LOAD["rate"]
    return Inputs(
        service, steady_figures(), watched(1, rate), T0, TuningSettings(), True, spare_pods=SPARE
    )


def test_the_steady_fault_service_gets_no_budget_move_and_no_decision_that_moves() -> None:
    i = steady_inputs()
    assert compute_fewer_pods(i) is None
    d = decide(i.spec, i.snapshot, i.state, i.now, spare_pods=SPARE)
    assert d.action.kind == "Hold", (d.reason, d.message)


def test_with_the_default_valve_the_same_service_gets_the_floor_bet_the_fault_test_avoids() -> None:
    """The check above can fail: the fault services' usual budgets (valve 8, running 8) on the
    same load are the ones rule 9b bets on, which is why the fault test fits its service's."""
    move = compute_fewer_pods(steady_inputs(budgets=tuned_spec()["budgets"]))
    assert move is not None and move.field == "maxRequests"
    assert move.per_pod_after > move.per_pod_now
