"""The API server in front of the engine core: per-request latency, serial CPU and chat's extra."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

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


def _shared_exactly(events: list[tuple[Fraction, Fraction | None, int]]) -> dict[int, Fraction]:
    """Processor sharing by its definition, in exact arithmetic: between two events every job
    in work gets 1/n of the CPU; `(time, work, job)` arrives, `(time, None, job)` is aborted."""
    left: dict[int, Fraction] = {}
    done: dict[int, Fraction] = {}
    t = Fraction(0)
    pending = sorted(events, key=lambda e: e[0])
    while pending or left:
        nxt = pending[0][0] if pending else None
        while left:
            n = len(left)
            least = min(left.values())
            if nxt is not None and t + least * n > nxt:
                break
            t += least * n
            for job in [j for j, w in left.items() if w == least]:
                done[job] = t
                del left[job]
            for job in left:
                left[job] -= least
        if not pending:
            break
        at, work, job = pending.pop(0)
        if left:
            share = (at - t) / len(left)
            for j in left:
                left[j] -= share
        t = at
        if work is None:
            left.pop(job, None)
        else:
            left[job] = work
    return done


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 40),  # arrival, ms
            st.integers(1, 12),  # CPU, ms
            st.one_of(st.none(), st.integers(0, 30)),  # aborted this many ms after arrival
        ),
        max_size=25,
    )
)
def test_finish_times_are_processor_sharings(jobs: list[tuple[int, int, int | None]]) -> None:
    ms = Fraction(1, 1000)
    events: list[tuple[Fraction, Fraction | None, int]] = []
    for job, (at, cpu, abort) in enumerate(jobs):
        events.append((at * ms, cpu * ms, job))
        if abort is not None:
            events.append(((at + abort) * ms + ms / 3, None, job))  # never on an arrival
    expected = _shared_exactly(events)
    # an abort at the very instant its job is done is a tie floats may break either way
    assume(all(expected.get(job) != at for at, work, job in events if work is None))

    api: ApiServer[int] = ApiServer()
    got: dict[int, float] = {}
    for at, work, job in sorted(events, key=lambda e: e[0]):
        got |= {j: t for t, j in api.take(float(at))}
        if work is None:
            api.remove(job)
        else:
            got |= {j: t for t, j in api.add(float(at), float(work), job)}
    got |= {j: t for t, j in api.take(1e9)}
    assert got.keys() == expected.keys()
    for job, t in got.items():
        assert t == pytest.approx(float(expected[job]), abs=1e-12)
