"""The time-stepped driver: a workload against a Fleet in virtual time.

The driver jumps from one arrival, tick or replica readiness to the next; the engines jump from
step end to step end in between, so a run costs per step and per request, never per
millisecond. `on_tick(now, fleet)` runs every `tick` seconds of virtual time (a control loop
may resize or restart the fleet there). After `until`, no more requests arrive; with `drain`
the run continues until every accepted request has finished. A caller that needs only a verdict
passes `stop`, which sees the records so far after every event and may end the run there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from vllm_operator.sim.engine import RequestEvent, RequestRecord, SimRequest
from vllm_operator.sim.fleet import Fleet, Replica
from vllm_operator.sim.report import Figures, Slo, compute_figures

Outcome = Literal["ok", "rejected", "unfinished"]


@dataclass(frozen=True)
class RunRecord:
    """One request as the client saw it (one per choice when n > 1)."""

    request_id: str
    arrival: float
    prompt_tokens: int
    max_tokens: int
    replica: int | None
    outcome: Outcome
    reject_reason: str | None = None
    record: RequestRecord | None = None  # the engine's record when completed


@dataclass(frozen=True)
class Sample:
    """Fleet state at a tick (after on_tick ran)."""

    time: float
    ready: int
    starting: int
    draining: int
    running: int
    waiting: int
    kv_usage_mean: float


@dataclass(frozen=True)
class RunResult:
    records: tuple[RunRecord, ...]
    samples: tuple[Sample, ...]
    steps: int
    summarize: Callable[[], Figures] = field(repr=False, compare=False)
    stopped: bool = False  # `stop` ended the run: the records are those up to then

    @cached_property
    def figures(self) -> Figures:
        """The run's figures, computed when first asked for (a replay judged from its records
        alone never needs them)."""
        return self.summarize()


def _sample(now: float, fleet: Fleet) -> Sample:
    states = [r.state for r in fleet.live]
    stats = [r.engine.stats() for r in fleet.live if r.state != "starting"]
    return Sample(
        time=now,
        ready=states.count("ready"),
        starting=states.count("starting"),
        draining=states.count("draining"),
        running=sum(s.num_running for s in stats),
        waiting=sum(s.num_waiting for s in stats),
        kv_usage_mean=sum(s.kv_usage for s in stats) / len(stats) if stats else 0.0,
    )


class _Books:
    """Requests in flight and finished, keyed by id (records arrive as finished events)."""

    def __init__(self) -> None:
        self.pending: dict[str, tuple[SimRequest, int, int]] = {}  # id -> (req, replica, left)
        self.records: list[RunRecord] = []
        self.offered = 0

    def accept(self, req: SimRequest, replica: int) -> None:
        self.pending[req.request_id] = (req, replica, req.n)

    def reject(self, req: SimRequest, replica: int | None, reason: str) -> None:
        self.records.append(
            RunRecord(
                req.request_id,
                req.arrival,
                req.prompt_tokens,
                req.max_tokens,
                replica,
                "rejected",
                reason,
            )
        )

    def finished(self, replica: int, record: RequestRecord) -> None:
        req, _, left = self.pending[record.request_id]
        if left > 1:
            self.pending[record.request_id] = (req, replica, left - 1)
        else:
            del self.pending[record.request_id]
        self.records.append(
            RunRecord(
                req.request_id,
                req.arrival,
                req.prompt_tokens,
                req.max_tokens,
                replica,
                "ok",
                None,
                record,
            )
        )

    def unfinished(self) -> None:
        for req, replica, left in self.pending.values():
            for _ in range(left):
                self.records.append(
                    RunRecord(
                        req.request_id,
                        req.arrival,
                        req.prompt_tokens,
                        req.max_tokens,
                        replica,
                        "unfinished",
                    )
                )
        self.pending.clear()


def _collect(books: _Books, events: list[tuple[int, RequestEvent]]) -> None:
    for replica, event in events:
        if event.record is not None:
            books.finished(replica, event.record)


def run(
    workload: Iterable[SimRequest],
    fleet: Fleet,
    until: float,
    on_tick: Callable[[float, Fleet], None] | None = None,
    tick: float = 1.0,
    *,
    slo: Slo | None = None,
    drain: bool = True,
    progress: Callable[[float], None] | None = None,
    stop: Callable[[Sequence[RunRecord]], bool] | None = None,
) -> RunResult:
    """Replay `workload` (sorted by arrival) on `fleet` from t=0 to `until`; `stop(records)`,
    asked after every event, ends it early (RunResult.stopped, nothing drained)."""
    if tick <= 0:
        raise ValueError(f"tick must be > 0, got {tick}")
    books = _Books()
    samples: list[Sample] = []
    arrivals = iter(workload)
    nxt = next(arrivals, None)
    next_tick = tick
    next_progress = until / 10 if progress is not None and until > 0 else float("inf")
    inf = float("inf")
    while True:
        t_arrival = nxt.arrival if nxt is not None and nxt.arrival <= until else inf
        t_action = fleet.next_action_time()
        now = min(t_arrival, next_tick, inf if t_action is None else t_action)
        if now > until:
            break
        _collect(books, fleet.advance_to(now))
        if now == t_arrival and nxt is not None:
            books.offered += 1
            replica, reason = fleet.submit(nxt, now)
            if reason is None and replica is not None:
                books.accept(nxt, replica)
            else:
                books.reject(nxt, replica, reason or "unknown")
            nxt = next(arrivals, None)
        if now == next_tick:
            if on_tick is not None:
                on_tick(now, fleet)
            samples.append(_sample(now, fleet))
            next_tick += tick
        while progress is not None and now >= next_progress:
            progress(next_progress)
            next_progress += until / 10
        if stop is not None and stop(books.records):
            return _result(books, samples, fleet, until, now, slo, stopped=True)
    _collect(books, fleet.advance_to(until))
    end = until
    while drain and (t := fleet.next_event_time()) is not None:
        _collect(books, fleet.advance_to(t))
        end = max(end, t)
        if stop is not None and stop(books.records):
            return _result(books, samples, fleet, until, end, slo, stopped=True)
    books.unfinished()
    return _result(books, samples, fleet, until, end, slo)


def _result(
    books: _Books,
    samples: list[Sample],
    fleet: Fleet,
    until: float,
    end: float,
    slo: Slo | None,
    stopped: bool = False,
) -> RunResult:
    """The run's result, with what its figures need from the fleet taken now and the figures
    themselves computed when asked for."""
    records = tuple(books.records)
    last = max((r.record.finished for r in records if r.record is not None), default=until)
    window = max(until, last)
    replicas: list[Replica] = [*fleet.live, *fleet.retired]
    kv_seconds = lifetime = kv_max = 0.0
    preemptions = steps = 0
    for replica in replicas:
        stats = replica.engine.stats()
        kv_seconds += stats.kv_usage_seconds
        stop = replica.stopped_at if replica.stopped_at is not None else max(end, window)
        lifetime += max(0.0, stop - min(replica.ready_at, stop))
        kv_max = max(kv_max, stats.kv_usage_peak)
        preemptions += stats.preemptions
        steps += stats.num_steps
    offered, kv_mean = books.offered, kv_seconds / lifetime if lifetime > 0 else 0.0

    def summarize() -> Figures:
        return compute_figures(
            [r.record for r in records if r.record is not None],
            offered=offered,
            rejected_reasons=[r.reject_reason or "" for r in records if r.outcome == "rejected"],
            unfinished=sum(1 for r in records if r.outcome == "unfinished"),
            window=window,
            slo=slo,
            kv_usage_mean=kv_mean,
            kv_usage_max=kv_max,
            preemptions=preemptions,
        )

    return RunResult(records, tuple(samples), steps, summarize, stopped)
