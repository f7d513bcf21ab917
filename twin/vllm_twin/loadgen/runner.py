"""Open-loop load: every scheduled request is sent at its time, whatever the earlier ones do.

Times are in the target's time: against a twin started with `--time-scale X`, pass the same X
and the schedule is compressed X-fold in wall time while every measured latency is stretched back
by X, so the figures read as the twin's virtual seconds. The run is bounded: requests are only
scheduled before the duration, and each one gives up after its retry deadline plus one request
timeout.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import aiohttp

from vllm_operator.sim.benchserve import ClientSample
from vllm_operator.sim.closedloop import ClosedLoop, ClosedLoopSpec, Job
from vllm_twin.loadgen.backoff import RetryPolicy
from vllm_twin.loadgen.client import Attempt, completion_body, send_completion
from vllm_twin.loadgen.report import Outcome
from vllm_twin.loadgen.targets import check_target
from vllm_twin.loadgen.trace import Arrival


@dataclass(frozen=True)
class LoadSpec:
    targets: tuple[str, ...]
    arrivals: tuple[Arrival, ...]
    stream: bool = True
    retry: RetryPolicy | None = None  # None: a 503 is final
    model: str | None = None
    time_scale: float = 1.0
    request_timeout: float = 60.0  # per attempt, target seconds
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.targets:
            raise ValueError("at least one target is needed")
        for t in self.targets:
            check_target(t)
        if self.time_scale <= 0 or self.request_timeout <= 0:
            raise ValueError("time scale and request timeout must be > 0")


class _RoundRobin:
    """Attempts, retries included, go to the targets in turn."""

    def __init__(self, targets: Sequence[str]) -> None:
        self._cycle = itertools.cycle(targets)

    def next(self) -> str:
        return next(self._cycle)


async def _one_request(
    a: Arrival,
    spec: LoadSpec,
    session: aiohttp.ClientSession,
    targets: _RoundRobin,
    clock: Callable[[], float],
    rng: random.Random,
) -> Outcome:
    body = completion_body(a.prompt_tokens, a.max_tokens, spec.stream, spec.model)
    start = clock()
    attempts = rejections = 0
    wall_timeout = spec.request_timeout / spec.time_scale
    while True:
        attempt: Attempt = await send_completion(session, targets.next(), body, clock, wall_timeout)
        attempts += 1
        if attempt.status != 503:
            break
        rejections += 1
        if spec.retry is None:
            break
        delay = spec.retry.next_delay(rejections - 1, clock() - start, rng)
        if delay is None:
            break
        # the backoff is the wait the client chose, not a wait for a condition
        await asyncio.sleep(delay / spec.time_scale)
    end = clock()
    ttft = attempt.chunk_times[0] - start if attempt.chunk_times else None
    gaps = tuple(later - earlier for earlier, later in itertools.pairwise(attempt.chunk_times))
    return Outcome(
        start=start,
        end=end,
        status=attempt.status,
        attempts=attempts,
        rejections=rejections,
        prompt_tokens=a.prompt_tokens,
        output_tokens=attempt.output_tokens if attempt.status == 200 else 0,
        ttft=ttft if attempt.status == 200 else None,
        itls=gaps if attempt.status == 200 else (),
        error=attempt.error,
        finish_reason=attempt.finish_reason,
    )


async def run_load(
    spec: LoadSpec,
    wall_clock: Callable[[], float] = time.monotonic,
    stopped: Callable[[], bool] | None = None,
) -> list[Outcome]:
    """Send the schedule and return one outcome per sent request, in schedule order. With
    `stopped`, the schedule ends at the first arrival due once it returns true (what was sent
    still runs to its end): a test can hold load across an event it waits on, then let go."""
    wall0 = wall_clock()

    def clock() -> float:
        return (wall_clock() - wall0) * spec.time_scale

    targets = _RoundRobin([check_target(t) for t in spec.targets])
    rng = random.Random(spec.seed)
    tasks: list[asyncio.Task[Outcome]] = []
    # limit=0: an open-loop generator must not queue requests behind a connection pool
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        for a in spec.arrivals:
            wait = (a.offset - clock()) / spec.time_scale
            if wait > 0:
                await asyncio.sleep(wait)  # the arrival schedule itself
            if stopped is not None and stopped():
                break
            tasks.append(asyncio.create_task(_one_request(a, spec, session, targets, clock, rng)))
        return list(await asyncio.gather(*tasks))


async def run_closed_load(
    spec: LoadSpec, loop_spec: ClosedLoopSpec, wall_clock: Callable[[], float] = time.monotonic
) -> list[ClientSample]:
    """`loop_spec.concurrency` requests in flight until every job was sent (the engine model's
    `ClosedLoop` decides which, so the virtual-time runner sends the same); `spec.arrivals` is
    not used. One sample per job, in send order."""
    wall0 = wall_clock()

    def clock() -> float:
        return (wall_clock() - wall0) * spec.time_scale

    targets = _RoundRobin([check_target(t) for t in spec.targets])
    rng = random.Random(spec.seed)
    loop = ClosedLoop(loop_spec)
    samples: dict[int, ClientSample] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        def send(job: Job) -> asyncio.Task[Outcome]:
            arrival = Arrival(clock(), job.prompt_tokens, job.max_tokens)
            task = asyncio.create_task(_one_request(arrival, spec, session, targets, clock, rng))
            jobs[task] = job
            return task

        jobs: dict[asyncio.Task[Outcome], Job] = {}
        running = {send(job) for job in loop.start()}
        while running:
            done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=lambda t: jobs[t].index):
                job = jobs.pop(task)
                samples[job.index] = client_sample(task.result(), job.counted)
                if (nxt := loop.finished()) is not None:
                    running.add(send(nxt))
    return [samples[i] for i in sorted(samples)]


def client_sample(outcome: Outcome, counted: bool = True) -> ClientSample:
    """An outcome as the bench-serve figures read it."""
    return ClientSample(
        start=outcome.start,
        end=outcome.end,
        prompt_tokens=outcome.prompt_tokens,
        output_tokens=outcome.output_tokens,
        ttft=outcome.ttft,
        itls=outcome.itls,
        ok=outcome.ok,
        counted=counted,
    )
