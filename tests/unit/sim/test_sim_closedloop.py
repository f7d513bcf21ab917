"""The closed loop's send order and the bench-serve figures, by hand."""

from __future__ import annotations

import math

import pytest

from vllm_operator.sim.benchserve import ClientSample, bench_serve_figures, format_bench_serve
from vllm_operator.sim.catalog import load_catalog
from vllm_operator.sim.closedloop import ClosedLoop, ClosedLoopSpec, run_closed_loop
from vllm_operator.sim.engine import EngineConfig
from vllm_operator.sim.fleet import Fleet
from vllm_operator.sim.workload import LengthDist

FIXED = LengthDist("fixed", 100)


def test_the_loop_keeps_n_in_flight_and_sends_every_job_once() -> None:
    loop = ClosedLoop(ClosedLoopSpec(3, 5, FIXED, FIXED, warmup=2))
    first = loop.start()
    assert [j.index for j in first] == [0, 1, 2] and loop.in_flight == 3
    sent = list(first)
    while (job := loop.finished()) is not None:
        assert loop.in_flight == 3
        sent.append(job)
    assert [j.index for j in sent] == list(range(7))
    assert [j.counted for j in sent] == [False, False] + [True] * 5
    while not loop.done:
        assert loop.finished() is None


def test_a_loop_smaller_than_its_concurrency_sends_everything_at_once() -> None:
    assert len(ClosedLoop(ClosedLoopSpec(8, 3, FIXED, FIXED)).start()) == 3


@pytest.mark.parametrize("field", ["concurrency", "num_prompts"])
def test_bad_sizes_are_refused(field: str) -> None:
    values = {"concurrency": 1, "num_prompts": 1, field: 0}
    with pytest.raises(ValueError, match=field):
        ClosedLoopSpec(values["concurrency"], values["num_prompts"], FIXED, FIXED)


def test_figures_follow_vllm_bench_serve_definitions() -> None:
    samples = [
        ClientSample(0.0, 9.0, 10, 5, 1.0, (1.0, 2.0, 3.0, 2.0), counted=False),  # warm-up
        ClientSample(1.0, 3.0, 10, 3, 0.5, (0.5, 1.0)),
        ClientSample(2.0, 6.0, 20, 1, 4.0, ()),  # one token: no TPOT
        ClientSample.failed(2.5, 30),
    ]
    f = bench_serve_figures(samples)
    assert (f.completed, f.failed) == (2, 1)
    assert f.duration_s == 5.0  # first counted send (1.0) to last counted end (6.0)
    assert (f.total_input_tokens, f.total_output_tokens) == (30, 4)
    assert (f.request_throughput, f.output_throughput, f.total_token_throughput) == (0.4, 0.8, 6.8)
    assert (f.ttft_ms.mean, f.ttft_ms.median) == (2250.0, 2250.0)
    assert f.tpot_ms.mean == 750.0  # (2.0 - 0.5) / (3 - 1)
    assert (f.itl_ms.mean, f.itl_ms.p99) == (750.0, 995.0)
    assert f.e2el_ms.mean == 3000.0
    assert "Mean TTFT (ms):" in format_bench_serve(f)


def test_no_counted_request_gives_nan_figures() -> None:
    f = bench_serve_figures([])
    assert f.completed == 0 and math.isnan(f.duration_s) and math.isnan(f.ttft_ms.mean)


def test_the_runner_keeps_concurrency_in_virtual_time() -> None:
    catalog = load_catalog()
    fleet = Fleet(EngineConfig(), catalog.gpu("H100-80GB"), catalog.model("Llama-3.1-8B"))
    one = bench_serve_figures(run_closed_loop(ClosedLoopSpec(1, 6, FIXED, FIXED), fleet))
    fleet = Fleet(EngineConfig(), catalog.gpu("H100-80GB"), catalog.model("Llama-3.1-8B"))
    samples = run_closed_loop(ClosedLoopSpec(4, 24, FIXED, FIXED, warmup=4), fleet)
    four = bench_serve_figures(samples)
    assert one.completed == 6 and four.completed == 24
    # with one in flight, every request starts when the previous one ends
    assert one.duration_s == pytest.approx(6 * one.e2el_ms.mean / 1000)
    # four at a time share the steps: more throughput at a higher per-token time
    assert four.request_throughput > 2.5 * one.request_throughput
    assert four.itl_ms.mean > one.itl_ms.mean
    starts = sorted(s.start for s in samples)
    ends = sorted(s.end for s in samples)
    assert all(sum(1 for e in ends if e <= t) >= i - 3 for i, t in enumerate(starts))
