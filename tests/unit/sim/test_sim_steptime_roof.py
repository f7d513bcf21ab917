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
    # the linear layers' crossover (GEMM FLOPs = weight stream) falls at some batch of short
    # decodes; there neither hides the other
    batches = range(16, 1025, 16)
    worst = max(soft.decode_duration(n, n) / hard.decode_duration(n, n) for n in batches)
    assert worst > 1.1


def test_linear_layers_and_attention_add_up() -> None:
    # Linear layers and attention are kernels run one after the other, each bound by its own
    # compute or memory, and their times add (the H200's, steptime.py). At a batch of 1,024
    # decodes the GEMMs are compute-bound (~50 ms); 1K tokens of context each add a KV read
    # (~50 ms) that one roof over both kernels would hide behind the GEMMs almost entirely.
    hard = _timer(0.0)
    alone = hard.decode_duration(1, 1_024_000) - hard.decode_duration(1, 1)
    behind_gemms = hard.decode_duration(1024, 1_024_000) - hard.decode_duration(1024, 1024)
    assert behind_gemms > 0.9 * alone


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
