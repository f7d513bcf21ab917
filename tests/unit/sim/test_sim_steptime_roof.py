"""The smooth roofline (`overlap`): a hard max at 0, slower near the crossover, same both paths."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_operator.sim.engine import StepCoefficients, StepTimeModel

from .helpers import CATALOG


def _timer(overlap: float) -> StepTimeModel:
    return StepTimeModel(
        CATALOG.gpu("H100-80GB"),
        CATALOG.model("Llama-3.1-8B"),
        tp=1,
        kv_bytes_per_token=131072,
        coeffs=StepCoefficients(overlap=overlap),
    )


def test_overlap_slows_the_crossover_and_leaves_the_extremes() -> None:
    hard, soft = _timer(0.0), _timer(0.5)
    # one decode: memory-bound, the weights dominate; the smooth roof adds almost nothing
    assert soft.decode_duration(1, 1) == pytest.approx(hard.decode_duration(1, 1), rel=0.01)
    # a batch near the crossover of compute and memory: neither hides the other
    assert soft.decode_duration(512, 512 * 200) > 1.1 * hard.decode_duration(512, 512 * 200)


@settings(derandomize=True, max_examples=40, deadline=None)
@given(
    overlap=st.sampled_from([0.0, 0.25, 0.5, 0.7]),
    reqs=st.integers(1, 512),
    ctx=st.integers(1, 2_000_000),
)
def test_the_fast_decode_path_matches_the_general_one(overlap: float, reqs: int, ctx: int) -> None:
    timer = _timer(overlap)
    general = timer.duration(reqs, 0, reqs, ctx, 0, 2 * ctx)
    assert timer.decode_duration(reqs, ctx) == general
