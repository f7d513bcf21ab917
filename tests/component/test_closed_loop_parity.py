"""The twin's HTTP server and the virtual-time runner agree on a closed-loop workload.

Both drive the same `ClosedLoop` (sim.closedloop): the runner against a Fleet in virtual time,
the load generator against an in-process twin over real loopback HTTP. The event loop here runs
on a virtual clock (`_VirtualLoop`): when no socket is ready it jumps its clock to the next
timer instead of waiting, so the twin's driver and the client see engine time, not this
machine's load, and the comparison is deterministic.

The HTTP server answers at the engine's step end, while the runner's client view adds the
API-side output delays (alpha2 per output, alpha1 on the final one: docs/twin-calibration.md
§2.3). Under a millisecond, but in a closed loop it moves the next send, and a send that lands
just after a schedule() waits a whole step more: the figures then differ by steps, not by the
delay. So both sides run with those two delays at zero (a --profiles override), and what is left
to differ is float rounding in the driver's clock arithmetic: the figures agree to 0.1%.
"""

from __future__ import annotations

import asyncio
import math
import selectors
from pathlib import Path
from typing import Any

from vllm_operator.sim.benchserve import BenchServeFigures, bench_serve_figures
from vllm_operator.sim.catalog import load_catalog
from vllm_operator.sim.closedloop import ClosedLoopSpec, run_closed_loop
from vllm_operator.sim.fleet import Fleet
from vllm_operator.sim.workload import LengthDist
from vllm_twin.argv import parse_vllm_argv
from vllm_twin.loadgen.runner import LoadSpec, run_closed_load
from vllm_twin.server.app import build_app, start_server
from vllm_twin.server.setup import build_engine
from vllm_twin.server.state import ServeOptions

MODEL = "Qwen/Qwen2.5-7B-Instruct"
SPEC = ClosedLoopSpec(
    concurrency=4,
    num_prompts=16,
    prompt=LengthDist("uniform", 64, 512),
    output=LengthDist("uniform", 8, 40),
    warmup=4,
    seed=3,
)


class _VirtualSelector:
    """A selector whose idle waits advance a virtual clock instead of the wall clock."""

    def __init__(self) -> None:
        self._real = selectors.DefaultSelector()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[Any]:
        ready = self._real.select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            return self._real.select(None)  # nothing scheduled: only I/O can wake us
        self.now += timeout
        return []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._virtual = _VirtualSelector()
        super().__init__(self._virtual)  # type: ignore[arg-type]

    def time(self) -> float:
        return self._virtual.now


def _profiles(tmp_path: Path) -> Path:
    path = tmp_path / "no-output-delays.yaml"
    path.write_text("coefficients: {output_delay: 0.0, finish_overhead: 0.0}\n", "utf-8")
    return path


def _twin_figures(profiles: Path) -> BenchServeFigures:
    args = parse_vllm_argv([MODEL, "--gpu", "H100-80GB", "--sim-profiles", str(profiles)], {})
    setup = build_engine(args)
    options = ServeOptions(
        model=args.model,
        served_model_names=args.served_model_names,
        time_scale=1.0,
        disable_log_stats=True,
        stream_interval=args.stream_interval,
    )

    async def main() -> BenchServeFigures:
        loop = asyncio.get_running_loop()
        app = build_app(setup.engine, options, clock=loop.time)
        runner, port = await start_server(app, "127.0.0.1", 0)
        try:
            spec = LoadSpec(targets=(f"http://127.0.0.1:{port}",), arrivals=(), stream=True)
            samples = await run_closed_load(spec, SPEC, wall_clock=loop.time)
        finally:
            await runner.cleanup()
        return bench_serve_figures(samples)

    loop = _VirtualLoop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def _runner_figures(profiles: Path) -> BenchServeFigures:
    args = parse_vllm_argv([MODEL, "--gpu", "H100-80GB"], {})
    catalog = load_catalog(profiles)
    fleet = Fleet(
        args.engine,
        catalog.gpu("H100-80GB"),
        catalog.model(MODEL),
        1,
        coeffs=catalog.coefficients,
    )
    return bench_serve_figures(run_closed_loop(SPEC, fleet))


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-3)


def test_http_twin_and_runner_give_the_same_closed_loop_figures(tmp_path: Path) -> None:
    profiles = _profiles(tmp_path)
    twin, sim = _twin_figures(profiles), _runner_figures(profiles)
    assert (twin.completed, twin.failed) == (sim.completed, sim.failed) == (16, 0)
    assert twin.total_input_tokens == sim.total_input_tokens
    assert twin.total_output_tokens == sim.total_output_tokens
    assert _close(twin.duration_s * 1000, sim.duration_s * 1000)
    assert _close(twin.request_throughput, sim.request_throughput)
    assert _close(twin.output_throughput, sim.output_throughput)
    for name in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
        for stat in ("mean", "median", "p99"):
            got, want = getattr(getattr(twin, name), stat), getattr(getattr(sim, name), stat)
            assert _close(got, want), f"{name}.{stat}: twin {got:.3f} ms, runner {want:.3f} ms"
