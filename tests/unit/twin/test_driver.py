"""The real-time driver around the real engine, on a hand-moved clock."""

from __future__ import annotations

import asyncio
import contextlib

from vllm_operator.sim.catalog import load_catalog
from vllm_operator.sim.engine import (
    Engine,
    EngineConfig,
    EngineStats,
    Rejected,
    RequestEvent,
    RequestRecord,
    SimRequest,
)
from vllm_twin.server.driver import EngineDriver


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class Recorder:
    def __init__(self) -> None:
        self.first: list[str] = []
        self.finished: list[RequestRecord] = []
        self.done: list[tuple[str, int]] = []
        self.stats: list[EngineStats] = []

    def on_stats(self, stats: EngineStats) -> None:
        self.stats.append(stats)

    def on_first_output(self, event: RequestEvent, request: SimRequest) -> None:
        self.first.append(f"{event.request_id}/{event.index}")

    def on_finished(self, record: RequestRecord, request: SimRequest) -> None:
        self.finished.append(record)

    def on_request_done(self, request: SimRequest, max_output_tokens: int) -> None:
        self.done.append((request.request_id, max_output_tokens))


class CountingEngine(Engine):
    advances = 0

    def advance(self, now: float) -> list[RequestEvent]:
        self.advances += 1
        return super().advance(now)


def engine(**cfg: int) -> CountingEngine:
    catalog = load_catalog()
    return CountingEngine(
        EngineConfig(**cfg),  # type: ignore[arg-type]
        catalog.gpus["H100-80GB"],
        catalog.models["Qwen2.5-7B"],
        coeffs=catalog.coefficients,
    )


def drain(q: asyncio.Queue[RequestEvent]) -> list[RequestEvent]:
    out = []
    while not q.empty():
        out.append(q.get_nowait())
    return out


def test_virtual_time_is_scaled_wall_time() -> None:
    clock = Clock()
    d = EngineDriver(engine(), Recorder(), clock=clock, time_scale=4.0)
    clock.t += 2.5
    assert d.now() == 10.0


def test_events_reach_the_queue_and_the_observer_in_vllms_order() -> None:
    async def main() -> None:
        clock, rec = Clock(), Recorder()
        d = EngineDriver(engine(), rec, clock=clock)
        q = d.submit(SimRequest("a", d.now(), prompt_tokens=50, max_tokens=3, n=2))
        assert isinstance(q, asyncio.Queue) and d.active == 1
        clock.t += 30.0
        d.sync()
        events = drain(q)
        assert sorted((e.index, e.kind) for e in events) == [
            (0, "finished"), (0, "tokens"), (0, "tokens"), (0, "tokens"),
            (1, "finished"), (1, "tokens"), (1, "tokens"), (1, "tokens"),
        ]  # fmt: skip
        assert sorted(rec.first) == ["a/0", "a/1"]
        assert [r.output_tokens for r in rec.finished] == [3, 3]
        assert rec.done == [("a", 3)]
        assert d.active == 0

    asyncio.run(main())


def test_rejection_is_returned_and_counted_at_once() -> None:
    async def main() -> None:
        clock, rec = Clock(), Recorder()
        d = EngineDriver(engine(max_num_queued_reqs=1), rec, clock=clock)
        assert not isinstance(d.submit(SimRequest("a", d.now(), 10, 50)), Rejected)
        rejected = d.submit(SimRequest("b", d.now(), 10, 50))
        assert isinstance(rejected, Rejected) and rejected.reason == "max_num_queued_reqs"
        assert rec.stats[-1].rejections["max_num_queued_reqs"] == 1

    asyncio.run(main())


def test_abort_frees_the_request_and_records_nothing() -> None:
    async def main() -> None:
        clock, rec = Clock(), Recorder()
        d = EngineDriver(engine(), rec, clock=clock)
        q = d.submit(SimRequest("a", d.now(), 10, 10_000))
        assert isinstance(q, asyncio.Queue)
        clock.t += 0.5
        d.sync()
        assert rec.first == ["a/0"] and rec.stats[-1].num_running == 1
        d.abort("a")
        clock.t += 0.5
        d.sync()
        assert rec.finished == [] and rec.done == []
        assert d.active == 0
        d.abort("a")  # a second abort (or one after the finish) is a no-op

    asyncio.run(main())


def test_the_driver_task_sleeps_while_idle_and_wakes_on_submit() -> None:
    async def main() -> None:
        e = engine()
        d = EngineDriver(e, Recorder(), clock=Clock())
        task = asyncio.create_task(d.run())
        for _ in range(200):  # give a busy loop every chance to show itself
            await asyncio.sleep(0)
        assert e.advances == 1
        d.submit(SimRequest("a", d.now(), 10, 5))
        advances = e.advances
        for _ in range(20):
            await asyncio.sleep(0)
        assert e.advances > advances  # woken by the submit
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert d.failure is None

    asyncio.run(main())


class FailingEngine(CountingEngine):
    broken = False

    def advance(self, now: float) -> list[RequestEvent]:
        if self.broken:
            raise RuntimeError("simulated engine bug")
        return super().advance(now)


def test_an_engine_error_fails_waiting_requests_and_marks_the_driver_dead() -> None:
    async def main() -> None:
        catalog = load_catalog()
        e = FailingEngine(EngineConfig(), catalog.gpus["H100-80GB"], catalog.models["Qwen2.5-7B"])
        d = EngineDriver(e, Recorder(), clock=Clock())
        task = asyncio.create_task(d.run())
        q = d.submit(SimRequest("a", d.now(), 10, 5))
        assert isinstance(q, asyncio.Queue)
        e.broken = True
        event = await asyncio.wait_for(q.get(), timeout=5)
        assert (event.kind, event.record) == ("finished", None)
        with contextlib.suppress(RuntimeError):
            await task
        assert isinstance(d.failure, RuntimeError)

    asyncio.run(main())
