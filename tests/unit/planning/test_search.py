"""The search in the engine model: fewest replicas, validation of every candidate, the SLO it
recommends against and vLLM's defaults, and what it says when nothing meets the SLO."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_operator.planning.candidate import Candidate, Target, build_service, check_service
from vllm_operator.planning.evaluate import Setting
from vllm_operator.planning.planner import PlanResult, Sweep, plan
from vllm_operator.planning.search import WHOLE, NoPlanError, Search
from vllm_operator.planning.workload import Workload, build_arrivals
from vllm_operator.sim.catalog import Catalog, load_catalog
from vllm_operator.sim.workload import LengthDist

EXP = LengthDist("exponential", 512), LengthDist("exponential", 128)


@functools.cache
def catalog() -> Catalog:
    return load_catalog()


def t4_load(rate: float = 8.0, horizon: float = 30) -> Workload:
    """Qwen2.5-3B on T4 at 8 req/s: the ITL target needs 4 replicas (3 hold TTFT only)."""
    return Workload("poisson", "t4", rate=rate, prompt=EXP[0], output=EXP[1], horizon=horizon)


T4_TARGET = Target(1.0, 0.1)


def t4_setting(target: Target = T4_TARGET) -> Setting:
    return Setting(catalog(), "Qwen2.5-3B", target, {"T4": 0.35})


def search_for(w: Workload, s: Setting, max_replicas: int = 8) -> Search:
    return Search(s, w, build_arrivals(w), None, max_replicas)


def test_fewest_replicas_is_what_a_linear_scan_finds() -> None:
    search = search_for(t4_load(), t4_setting())
    base = Candidate("T4", 1)
    linear = next(r for r in range(1, 9) if search.meets(Candidate("T4", r), "scan"))
    for guess in (1, 2, 6, 8):
        found = search.fewest_replicas(base, guess, "guess")
        assert found is not None and found.replicas == linear == 4


def test_fewest_replicas_is_none_beyond_max_replicas() -> None:
    search = search_for(t4_load(), t4_setting(), max_replicas=3)
    assert search.fewest_replicas(Candidate("T4", 1), 1, "capped") is None


def test_a_candidate_the_api_refuses_is_skipped_with_the_crd_message() -> None:
    search = search_for(t4_load(), t4_setting())
    bad = Candidate("T4", 1).with_budgets(max_num_seqs=64, max_num_batched_tokens=32)
    assert search.evaluate(bad, "bad") is None
    assert search.skipped == [(bad, search.skipped[0][1])]
    assert "maxBatchedTokens" in search.skipped[0][1]
    assert search.points == []


def test_a_candidate_vllm_would_not_start_is_skipped_with_vllms_message() -> None:
    # the spec is valid, but Llama-3.1-8B's weights and 131072-token context do not fit a T4
    w = Workload("poisson", "p", rate=1, prompt=EXP[0], output=EXP[1], horizon=10)
    search = search_for(w, Setting(catalog(), "Llama-3.1-8B", Target(1.0), {}))
    assert search.evaluate(Candidate("T4", 1), "too big") is None
    assert "memory" in search.skipped[0][1].lower() or "KV" in search.skipped[0][1]


@functools.cache
def t4_plan() -> PlanResult:
    return plan(t4_load(), ["T4"], t4_setting(), max_replicas=8)


def test_the_plan_meets_the_slo_with_its_margin_and_is_a_valid_service() -> None:
    result = t4_plan()
    rec = result.chosen.recommendation
    assert rec.meets_slo
    ttft, itl, rejection = t4_setting().target.limits()
    assert rec.ttft_p95_s <= ttft and rec.itl_p95_s <= (itl or math.inf)
    assert rec.rejected_share <= rejection
    assert rec.cost_per_hour == pytest.approx(0.35 * rec.gpu_hours_per_hour)
    for point in result.points:
        manifest = build_service(
            point.candidate, model="Qwen/Qwen2.5-3B-Instruct", name="x", namespace="ns",
            target=t4_setting().target,
        )  # fmt: skip
        assert check_service(manifest) is None


def test_the_plan_is_no_worse_than_vllm_defaults_on_as_many_gpus() -> None:
    result = t4_plan()
    rec, defaults = result.chosen.recommendation, result.chosen.defaults
    assert defaults is not None and defaults.candidate.gpus == rec.candidate.gpus
    assert rec.slo_attainment >= defaults.slo_attainment
    fewest_default = min(
        (p.gpu_hours_per_hour for p in result.points if p.meets_slo and not p.candidate.budgets),
        default=math.inf,
    )
    assert rec.gpu_hours_per_hour <= fewest_default


def test_an_slo_nothing_meets_names_the_closest_and_what_it_would_take() -> None:
    with pytest.raises(NoPlanError) as caught:
        plan(t4_load(), ["T4"], t4_setting(Target(1.0, 0.001)), max_replicas=4)
    message = str(caught.value)
    assert caught.value.closest is not None
    assert message.startswith("no configuration meets the SLO with its 10% margin; closest: ")
    assert "--slo-itl" in message and "it would take" in message


def test_a_sweep_evaluates_every_value_of_the_knob() -> None:
    result = plan(
        t4_load(), ["T4"], t4_setting(), max_replicas=8,
        sweep=Sweep("max_num_seqs", (8, 32, 128)),
    )  # fmt: skip
    swept = {
        p.candidate.budget("max_num_seqs") for p in result.points if p.label.startswith("sweep")
    }
    assert swept == {8, 32, 128}
    assert result.chosen.recommendation.meets_slo


def test_several_gpu_types_pick_the_cheapest() -> None:
    s = Setting(catalog(), "Qwen2.5-3B", Target(1.0, 0.1), {"T4": 0.35, "L4": 100.0})
    result = plan(t4_load(rate=4, horizon=10), ["L4", "T4"], s, max_replicas=8)
    assert result.chosen.gpu == "T4"
    assert {p.gpu for p in result.plans} == {"L4", "T4"}


def test_a_long_trace_is_checked_on_the_whole_of_it(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    rows = [f"2023-11-16 18:{t // 60:02d}:{t % 60:02d}.5,{200 + t},{20}" for t in range(0, 600, 2)]
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    w = Workload("trace", "csv", trace=str(trace), horizon=60)
    s = Setting(catalog(), "Qwen2.5-0.5B", Target(2.0), {})
    result = plan(w, ["H100-80GB"], s, max_replicas=8)
    assert result.sliced and result.chosen.recommendation.label == WHOLE
    assert result.chosen.recommendation.meets_slo


@settings(derandomize=True, max_examples=6, deadline=None)
@given(
    rate=st.floats(0.5, 12),
    prompt=st.sampled_from([128, 512, 1024]),
    ttft=st.floats(0.3, 2.0),
    itl=st.sampled_from([None, 0.06, 0.15]),
)
def test_property_every_recommendation_validates_meets_and_beats_defaults(
    rate: float, prompt: int, ttft: float, itl: float | None
) -> None:
    w = Workload(
        "poisson", "p", rate=rate, prompt=LengthDist("exponential", prompt),
        output=LengthDist("exponential", 64), horizon=20,
    )  # fmt: skip
    s = Setting(catalog(), "Qwen2.5-3B", Target(ttft, itl), {})
    try:
        result = plan(w, ["T4"], s, max_replicas=6)
    except NoPlanError as exc:
        assert exc.closest is None or not exc.closest.meets_slo
        return
    rec = result.chosen.recommendation
    assert rec.meets_slo
    assert (
        check_service(
            build_service(rec.candidate, model="m", name="n", namespace=None, target=s.target)
        )
        is None
    )
    defaults = result.chosen.defaults
    assert defaults is not None
    assert rec.slo_attainment >= defaults.slo_attainment or not defaults.meets_slo


def test_a_workload_the_model_cannot_hold_says_no_request_completed() -> None:
    # 200000-token prompts on a 32768-token model: every request is refused, TTFT is NaN
    too_long = LengthDist("fixed", 200_000), LengthDist("fixed", 32)
    w = Workload("poisson", "p", rate=1, prompt=too_long[0], output=too_long[1], horizon=10)
    with pytest.raises(NoPlanError, match="no request completed"):
        plan(w, ["T4"], t4_setting(), max_replicas=2)
