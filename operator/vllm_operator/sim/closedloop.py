"""Closed-loop load, as `vllm bench serve --max-concurrency N` sends it.

`ClosedLoop` decides what to send when: the first N requests at the start, then one more each
time a request finishes, until `warmup + num_prompts` have been sent. It does no I/O and keeps
no clock, so the virtual-time runner (`run_closed_loop` below) and the load generator against
real twins (`vllm_twin.loadgen.runner.run_closed_load`) drive the same sequence of requests.

The first `warmup` requests fill the server to its steady state and are not counted: the
figures (`sim.benchserve`) cover the counted requests only, from the first counted send to the
last counted finish.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

from vllm_operator.sim.benchserve import ClientSample
from vllm_operator.sim.engine import SimRequest
from vllm_operator.sim.fleet import Fleet
from vllm_operator.sim.workload import LengthDist


@dataclass(frozen=True)
class ClosedLoopSpec:
    concurrency: int
    num_prompts: int  # counted requests
    prompt: LengthDist
    output: LengthDist
    warmup: int = 0  # requests sent first and not counted
    seed: int = 0
    chat: bool = False  # chat requests (`vllm bench serve --backend openai-chat`)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.num_prompts < 1:
            raise ValueError(f"num_prompts must be >= 1, got {self.num_prompts}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")


@dataclass(frozen=True)
class Job:
    """One request of the loop; `index` counts from 0 in send order, warm-up first."""

    index: int
    prompt_tokens: int
    max_tokens: int
    counted: bool

    @property
    def request_id(self) -> str:
        return f"closed-{self.index}"


def plan_jobs(spec: ClosedLoopSpec) -> tuple[Job, ...]:
    """Every request's lengths, drawn once from the seed, so both drivers send the same ones."""
    rng = random.Random(spec.seed)
    total = spec.warmup + spec.num_prompts
    return tuple(
        Job(i, spec.prompt.sample(rng), spec.output.sample(rng), i >= spec.warmup)
        for i in range(total)
    )


class ClosedLoop:
    """Keeps `concurrency` requests in flight until every job has been sent."""

    def __init__(self, spec: ClosedLoopSpec) -> None:
        self.spec = spec
        self._jobs = plan_jobs(spec)
        self._next = 0
        self.in_flight = 0

    def start(self) -> list[Job]:
        """The jobs to send at once: min(concurrency, total)."""
        out = []
        while self.in_flight < self.spec.concurrency and (job := self._take()) is not None:
            out.append(job)
        return out

    def finished(self) -> Job | None:
        """A request ended (answered or failed): the job that takes its slot, if any is left."""
        self.in_flight -= 1
        return self._take()

    @property
    def done(self) -> bool:
        return self._next == len(self._jobs) and self.in_flight == 0

    def _take(self) -> Job | None:
        if self._next == len(self._jobs):
            return None
        job = self._jobs[self._next]
        self._next += 1
        self.in_flight += 1
        return job


def run_closed_loop(spec: ClosedLoopSpec, fleet: Fleet) -> list[ClientSample]:
    """Drive `fleet` in virtual time with a closed loop; one sample per job, in send order.

    A request is sent when the client sees the previous one end (the engine's finish plus the
    API-side output delays), as the benchmark client would. A 503 or 400 ends a request at once
    (failed), and its slot goes to the next job, as `vllm bench serve` counts failures.
    """
    loop = ClosedLoop(spec)
    due: list[tuple[float, int, Job]] = [(0.0, job.index, job) for job in loop.start()]
    heapq.heapify(due)
    sent: dict[str, tuple[float, Job]] = {}
    samples: dict[int, ClientSample] = {}
    inf = float("inf")

    def end(job: Job, at: float) -> None:
        nxt = loop.finished()
        if nxt is not None:
            heapq.heappush(due, (at, nxt.index, nxt))

    while not loop.done:
        t_send = due[0][0] if due else inf
        t_engine = fleet.next_event_time()
        now = min(t_send, inf if t_engine is None else t_engine)
        if now == inf:
            break  # nothing can make progress (no replica): the rest stays unsent
        for _, event in fleet.advance_to(now):
            record = event.record
            if record is None:
                continue
            start, job = sent.pop(record.request_id)
            finish = start + record.e2e
            samples[job.index] = ClientSample(
                start=start,
                end=finish,
                prompt_tokens=job.prompt_tokens,
                output_tokens=record.output_tokens,
                ttft=record.ttft,
                itls=record.itls,
                counted=job.counted,
            )
            end(job, finish)
        while due and due[0][0] <= now:
            _, _, job = heapq.heappop(due)
            req = SimRequest(job.request_id, now, job.prompt_tokens, job.max_tokens, chat=spec.chat)
            _, reason = fleet.submit(req, now)  # a 400 comes back as reason "invalid"
            if reason is None:
                sent[req.request_id] = (now, job)
                continue
            samples[job.index] = ClientSample.failed(now, job.prompt_tokens, job.counted)
            end(job, now)
    return [samples[i] for i in sorted(samples)]
