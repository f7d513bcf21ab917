"""How a measured point is read into a workload: EOS-stopped outputs and the chat endpoint."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_twin.calibration.measurements import parse_measurements
from vllm_twin.calibration.replay import eos_lengths, workload_spec

from .measurement_source import one_point


@settings(derandomize=True, max_examples=40, deadline=None)
@given(cap=st.integers(2, 4000), share=st.floats(0.05, 0.99))
def test_eos_lengths_average_the_measured_mean_under_the_cap(cap: int, share: float) -> None:
    mean = max(1.0, share * cap)
    dist = eos_lengths(cap, mean)
    assert dist.kind == "exponential" and dist.cap == cap
    # E[min(cap, Exp(mu))] = mu * (1 - exp(-cap / mu))
    assert dist.mean * -math.expm1(-cap / dist.mean) == pytest.approx(mean, rel=1e-9)


def test_eos_lengths_vary_so_a_closed_loop_leaves_lock_step() -> None:
    rng = random.Random(0)
    samples = [eos_lengths(128, 100.0).sample(rng) for _ in range(4000)]
    assert max(samples) == 128 and min(samples) < 20
    assert sum(samples) / len(samples) == pytest.approx(100.0, rel=0.03)


def _point(measured: dict[str, float], tool: str = "vllm bench serve") -> object:
    data = one_point(measured, workload={"output_len": 128, "ignore_eos": "unknown"})
    data["sources"][0]["tool"] = tool
    return parse_measurements(data).points[0]


def test_an_output_cap_stopped_early_reads_its_mean_from_the_throughputs() -> None:
    # 210 output tokens/s over 2.1 requests/s: 100 tokens per request, below the 128 cap
    spec = workload_spec(_point({"output_throughput_tps": 210.0, "request_throughput_rps": 2.1}))
    assert spec.output == eos_lengths(128, 100.0)
    reached = workload_spec(_point({"output_throughput_tps": 256.0, "request_throughput_rps": 2}))
    assert (reached.output.kind, reached.output.mean) == ("fixed", 128)


def test_a_chat_client_sends_chat_requests() -> None:
    measured = {"request_throughput_rps": 1.0}
    chat = "vllm bench serve (--backend openai-chat --endpoint /v1/chat/completions)"
    assert workload_spec(_point(measured, chat)).chat is True
    assert workload_spec(_point(measured)).chat is False
