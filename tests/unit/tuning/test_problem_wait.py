"""At the replica cap a budget move for a problem waits until the problem fills a window."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.tuning.support import T0, brief, snap, spec, state
from tests.unit.tuning.test_retune_move import L4_256, OVERLOADED, UNCAPPED
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.inputs import Inputs
from vllm_operator.tuning.model import TuningState
from vllm_operator.tuning.problem_wait import stamp_problem, window_wait
from vllm_operator.tuning.reasons import Reason
from vllm_operator.tuning.settings import TuningSettings

WINDOW = 120.0  # the support snapshot's window, longer than retune_problem_age (60 s)
# 503s the engine model does not reproduce (0.2 req/s on two L4 pods): the mix of a window
# the rise has only begun to fill
LIGHT: dict[str, Any] = {
    **OVERLOADED,
    "request_rate": 0.2,
    "admitted_rate": 0.1,
    "running": 0.5,
    "rejection_ratio": 0.5,
    "rejection_rate": 0.1,
}


def at(seconds: float, figures: dict[str, Any]) -> Any:
    return snap(**figures, observed_at=T0 + timedelta(seconds=seconds))


def test_a_capped_service_waits_one_window_then_makes_the_models_one_move() -> None:
    s = spec(**L4_256)
    first = decide(s, at(0, OVERLOADED), state(), T0)
    # ITL over SLO with the active cap far above the batch: the hold is rule 7's, at the cap,
    # and it says why the model's move did not go
    assert brief(first) == ("Hold", Reason.AT_MAX_REPLICAS, None, None, None), first.message
    assert "; a budget move waits 120s more for a 120s window" in first.message
    assert first.state.problem_since == T0
    assert first.state.overrides == {} and first.state.restart_times == ()
    almost = decide(s, at(119, OVERLOADED), first.state, T0 + timedelta(seconds=119))
    assert (
        almost.action.kind == "Hold"
        and "waits 1s more" in almost.message
        and almost.state.problem_since == T0
    )
    moved = decide(s, at(120, OVERLOADED), almost.state, T0 + timedelta(seconds=120))
    assert moved.reason == Reason.RETUNE_BY_MODEL, moved.message
    assert moved.action.kind == "SetBudget" and moved.applied


def test_the_x2_steps_wait_too_while_the_model_does_not_see_the_problem() -> None:
    s = spec(**L4_256)
    first = decide(s, at(0, LIGHT), state(), T0)
    # rule 3's valve is the remedy the wait blocks: the hold takes its reason
    assert first.reason == Reason.RETUNE_AWAITS_WINDOW, first.message
    assert first.message.startswith("503 ratio 50.0% over budget 0.5%"), first.message
    later = decide(s, at(WINDOW, LIGHT), first.state, T0 + timedelta(seconds=WINDOW))
    assert brief(later) == (
        "SetBudget",
        Reason.RAISE_QUEUE_REJECTIONS,
        "maxRequests",
        512,
        1024,
    ), later.message


def test_nothing_waits_with_replicas_free_or_without_a_model_to_wait_for() -> None:
    # replicas can be added: the fast lever acts at once, as before
    free = decide(spec(**UNCAPPED), at(0, OVERLOADED), state(), T0)
    assert free.reason != Reason.RETUNE_AWAITS_WINDOW and free.action.kind != "Hold"
    # a model the catalog lacks: no move would be sized on the window, the x2 step goes at once
    unknown = {**L4_256, "model": "org/unknown-model"}
    blind = decide(spec(**unknown), at(0, LIGHT), state(), T0)
    assert brief(blind)[:2] == ("SetBudget", Reason.RAISE_QUEUE_REJECTIONS), blind.message


def test_the_problem_clock_survives_guard_holds_and_stops_with_the_problem() -> None:
    s = spec(**L4_256)
    first = decide(s, at(0, OVERLOADED), state(), T0)
    stale = decide(s, at(0, {**OVERLOADED, "quality": "stale"}), first.state, T0)
    assert stale.reason == Reason.HOLD_METRICS_STALE and stale.state.problem_since == T0
    quiet = {**OVERLOADED, "itl_p95": 0.05, "running": 10.0}
    calm = decide(s, at(30, quiet), first.state, T0 + timedelta(seconds=30))
    assert calm.state.problem_since is None, calm.message
    again = decide(s, at(40, OVERLOADED), calm.state, T0 + timedelta(seconds=40))
    assert again.action.kind == "Hold" and "waits 120s more" in again.message
    assert again.state.problem_since == T0 + timedelta(seconds=40)


PASS_KINDS = st.lists(st.sampled_from(["problem", "quiet"]), min_size=1, max_size=40)


@settings(derandomize=True, max_examples=40, deadline=None)
@given(kinds=PASS_KINDS, step=st.integers(1, 90))
def test_the_wait_never_outlasts_the_window_of_a_problem_that_goes_on(
    kinds: list[str], step: int
) -> None:
    tuning = TuningSettings()
    s = spec(**L4_256)
    st_: TuningState = state()
    run = 0.0  # seconds the problem has been seen without a quiet pass between
    wait = max(tuning.retune_problem_age.total_seconds(), WINDOW)
    for n, kind in enumerate(kinds):
        now = T0 + timedelta(seconds=n * step)
        figures = OVERLOADED if kind == "problem" else {**OVERLOADED, "itl_p95": 0.05}
        figures = {**figures, "running": 10.0} if kind == "quiet" else figures
        i = stamp_problem(
            Inputs(s, replace(snap(**figures), observed_at=now), st_, now, tuning, True)
        )
        st_ = i.state
        run = run + step if kind == "problem" and n and kinds[n - 1] == "problem" else 0.0
        blocked = window_wait(i)
        if kind == "quiet":
            assert st_.problem_since is None and blocked is None
        else:
            assert (blocked is None) == (run >= wait), (n, run, blocked)
