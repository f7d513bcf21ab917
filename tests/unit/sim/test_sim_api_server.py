"""The API server in front of the engine core: per-request latency, serial CPU and chat's extra."""

from __future__ import annotations

import pytest

from vllm_operator.sim.engine import ConstantStepTime, Engine, EngineConfig, StepCoefficients

from .helpers import H100, LLAMA8, STEP, Run, drive, req

API = StepCoefficients(
    api_overhead=0.010,
    api_request_cost=0.002,
    api_chat_cost=0.005,
    output_delay=0.0,
    finish_overhead=0.0,
)


def _engine() -> Run:
    cfg = EngineConfig(max_model_len=1024, num_gpu_blocks_override=1000, async_scheduling=False)
    return Run(Engine(cfg, H100, LLAMA8, coeffs=API, step_time=ConstantStepTime(STEP)))


def test_a_burst_reaches_the_engine_one_api_cost_apart_and_chat_costs_more() -> None:
    burst = [
        (0.0, req("chat-a", 16, 2, chat=True)),
        (0.0, req("cmpl-b", 16, 2)),
        (0.0, req("chat-c", 16, 2, chat=True)),
    ]
    queued = {rid: r.queued for rid, r in drive(_engine(), burst).records().items()}
    # a: starts at 0, costs 2+5 ms; b: starts at 7 ms, costs 2; c: starts at 9 ms
    assert queued == {
        "chat-a": pytest.approx(0.010 + 0.005),
        "cmpl-b": pytest.approx(0.007 + 0.010),
        "chat-c": pytest.approx(0.009 + 0.010 + 0.005),
    }


def test_a_lone_chat_request_waits_its_extra_cost_on_its_path() -> None:
    records = drive(_engine(), [(1.0, req("chat", 16, 2, chat=True))]).records()
    assert records["chat"].queued == pytest.approx(1.0 + 0.010 + 0.005)
