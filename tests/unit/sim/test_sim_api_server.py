"""The API server in front of the engine core: per-request latency, serial CPU and chat's extra."""

from __future__ import annotations

import pytest

from vllm_operator.sim.engine import ConstantStepTime, Engine, EngineConfig, StepCoefficients
from vllm_operator.sim.engine.apiserver import ApiServer

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


def test_a_burst_shares_the_api_servers_cpu_and_chat_costs_more() -> None:
    burst = [
        (0.0, req("chat-a", 16, 2, chat=True)),
        (0.0, req("cmpl-b", 16, 2)),
        (0.0, req("chat-c", 16, 2, chat=True)),
    ]
    queued = {rid: r.queued for rid, r in drive(_engine(), burst).records().items()}
    # three share the CPU: b's 2 ms are done at 3 x 2 = 6 ms; a and c, 5 ms left each, at
    # 6 + 2 x 5 = 16 ms; each reaches the engine core api_overhead (10 ms) later
    assert queued == {
        "chat-a": pytest.approx(0.026),
        "cmpl-b": pytest.approx(0.016),
        "chat-c": pytest.approx(0.026),
    }


def test_a_lone_chat_request_waits_its_cost_on_its_path() -> None:
    records = drive(_engine(), [(1.0, req("chat", 16, 2, chat=True))]).records()
    assert records["chat"].queued == pytest.approx(1.0 + 0.007 + 0.010)


def test_processor_sharing_slows_a_job_by_those_that_arrive_while_it_runs() -> None:
    api: ApiServer[str] = ApiServer()
    assert api.add(0.0, 0.004, "a") == [] and api.next_finish() == pytest.approx(0.004)
    assert api.add(0.002, 0.004, "b") == []  # a has 2 ms left, now shared by two
    assert api.next_finish() == pytest.approx(0.006)
    done = api.take(1.0)
    assert [item for _, item in done] == ["a", "b"]
    assert [t for t, _ in done] == [pytest.approx(0.006), pytest.approx(0.008)]
    assert len(api) == 0 and api.next_finish() is None


def test_an_abort_in_the_api_server_frees_its_share() -> None:
    api: ApiServer[str] = ApiServer()
    api.add(0.0, 0.004, "a")
    api.add(0.0, 0.004, "b")
    api.take(0.002)
    assert api.remove("b") and not api.remove("b")
    assert api.take(1.0) == [(pytest.approx(0.005), "a")]
