"""Runs the pure engine in real time and hands its events to the waiting HTTP handlers.

Virtual time is `(wall - wall0) * time_scale`. The driver task sleeps until the engine's next
step ends, or until a submit or abort wakes it (an asyncio.Event), then advances the engine to
"now" and delivers what happened: token events to per-request queues, stats and finished records
to the observer. It never polls: with nothing scheduled it waits on the event alone.

Every entry point (submit, abort, sync) first advances the engine to the current virtual time,
so admission decisions and /metrics see the state of "now", not of the last wake-up.

Shutdown is vLLM 0.33's (docs/rollouts.md): once `drain()` starts, a new request ends at once
with finish_reason "abort" (the engine core's `_reject_add_in_shutdown`), in-flight requests run
on until they finish or the timeout passes, and what is left then ends with "abort" too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from vllm_operator.sim.engine import (
    Engine,
    EngineStats,
    Rejected,
    RequestEvent,
    RequestRecord,
    SimRequest,
)

# a step that the engine reports as already due after advance() would spin the loop; this
# floor (wall seconds) bounds that case instead of trusting every float comparison
_MIN_WAIT = 0.0005


class Observer(Protocol):
    """Where engine figures go (the vllm:* metrics), called in the order vLLM records them."""

    def on_stats(self, stats: EngineStats) -> None: ...

    def on_first_output(self, event: RequestEvent, request: SimRequest) -> None: ...

    def on_finished(self, record: RequestRecord, request: SimRequest) -> None: ...

    def on_request_done(self, request: SimRequest, max_output_tokens: int) -> None: ...


class NullObserver:
    """For `--disable-log-stats`: the engine still runs, nothing is recorded."""

    def on_stats(self, stats: EngineStats) -> None:
        pass

    def on_first_output(self, event: RequestEvent, request: SimRequest) -> None:
        pass

    def on_finished(self, record: RequestRecord, request: SimRequest) -> None:
        pass

    def on_request_done(self, request: SimRequest, max_output_tokens: int) -> None:
        pass


@dataclass
class _Active:
    """An admitted HTTP request: its n choices finish separately."""

    request: SimRequest
    events: asyncio.Queue[RequestEvent] = field(default_factory=asyncio.Queue)
    first_index: int = 0  # where its choices start in the answer (a completions batch)
    started: set[int] = field(default_factory=set)  # choice indexes that produced output
    tokens: dict[int, int] = field(default_factory=dict)  # choice index -> tokens delivered
    done: set[int] = field(default_factory=set)  # choice indexes that finished
    unfinished: int = 0
    max_output: int = 0

    def __post_init__(self) -> None:
        self.unfinished = self.request.n

    def put(self, event: RequestEvent) -> None:
        """Hand `event` to the HTTP handler, its choice index counted in the whole answer."""
        if self.first_index:
            event = replace(event, index=event.index + self.first_index)
        self.events.put_nowait(event)


class EngineDriver:
    def __init__(
        self,
        engine: Engine,
        observer: Observer,
        *,
        clock: Callable[[], float],
        time_scale: float = 1.0,
    ) -> None:
        if time_scale <= 0:
            raise ValueError(f"time scale must be > 0, got {time_scale}")
        self.engine = engine
        self._observer = observer
        self._clock = clock
        self._scale = time_scale
        self._wall0 = clock()
        self._active: dict[str, _Active] = {}
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()  # set while no request is in flight
        self._idle.set()
        self.draining = False  # SIGTERM came: new requests are aborted at once
        self.failure: BaseException | None = None  # set if the engine raised: /health says 503

    def now(self) -> float:
        """Current virtual time, in seconds since the driver was created."""
        return (self._clock() - self._wall0) * self._scale

    @property
    def active(self) -> int:
        return len(self._active)

    def sync(self) -> float:
        """Advance the engine to now and deliver everything due; returns that now."""
        now = self.now()
        for event in self.engine.advance(now):
            self._deliver(event)
        self._observer.on_stats(self.engine.stats())
        return now

    def _deliver(self, event: RequestEvent) -> None:
        active = self._active.get(event.request_id)
        if active is None:
            return  # aborted meanwhile: nobody waits, and vLLM records nothing for it
        if event.new_tokens > 0 and event.index not in active.started:
            active.started.add(event.index)
            self._observer.on_first_output(event, active.request)
        active.tokens[event.index] = active.tokens.get(event.index, 0) + event.new_tokens
        if event.kind == "finished":
            active.done.add(event.index)
            active.unfinished -= 1
            if event.record is not None:
                self._observer.on_finished(event.record, active.request)
                active.max_output = max(active.max_output, event.record.output_tokens)
            if active.unfinished <= 0:
                del self._active[event.request_id]
                self._observer.on_request_done(active.request, active.max_output)
                if not self._active:
                    self._idle.set()
        active.put(event)

    def preflight(self, n: int) -> Rejected | None:
        """vLLM's admission check before a request's prompts are rendered (its serving layer's
        `_preflight`): the rejection of a request of `n` sequences now, or None."""
        rejected = self.engine.check_admission(n, self.sync())
        if rejected is not None:
            self._observer.on_stats(self.engine.stats())  # the rejection counter moves now
        return rejected

    def submit(
        self,
        request: SimRequest,
        events: asyncio.Queue[RequestEvent] | None = None,
        first_index: int = 0,
    ) -> Rejected | asyncio.Queue[RequestEvent]:
        """Admit a request now; returns vLLM's rejection or the queue its events arrive on:
        `events` where given (the prompts of one batch share one), their choice indexes from
        `first_index` on.

        The engine's InvalidRequestError (a 400 in vLLM) propagates to the caller.
        """
        now = self.sync()
        events = asyncio.Queue() if events is None else events
        if self.draining:  # the engine never sees it: an answer that ends before it began
            refused = _Active(request, events, first_index)
            for index in range(request.n):
                refused.put(_aborted_event(refused, index, now))
            return refused.events
        rejected = self.engine.submit(request, now)
        if rejected is not None:
            self._observer.on_stats(self.engine.stats())  # the rejection counter moves now
            return rejected
        active = _Active(request, events, first_index)
        self._active[request.request_id] = active
        self._idle.clear()
        self._wake.set()
        return active.events

    def abort(self, request_id: str) -> None:
        """The client went away: free the engine's resources for it (no-op once finished)."""
        if request_id not in self._active:
            return
        now = self.sync()
        if self._active.pop(request_id, None) is not None:
            self.engine.abort(request_id, now)
            self._wake.set()
        if not self._active:
            self._idle.set()

    async def drain(self, shutdown_timeout: float) -> int:
        """vLLM's shutdown with --shutdown-timeout (virtual seconds; 0 aborts at once): refuse
        new work, let what runs finish, then abort the rest. Returns how many were cut."""
        self.draining = True
        if shutdown_timeout > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), shutdown_timeout / self._scale)
        now = self.sync()
        cut = 0
        for request_id, active in list(self._active.items()):
            self.engine.abort(request_id, now)
            for index in range(active.request.n):
                if index not in active.done:
                    active.put(_aborted_event(active, index, now))
            cut += 1
        self._active.clear()
        self._idle.set()
        self._wake.set()
        return cut

    async def run(self) -> None:
        """The driver task: runs until cancelled; an engine error is kept for /health."""
        try:
            while True:
                now = self.sync()
                self._wake.clear()
                due = self.engine.next_event_time()
                if due is None:
                    await self._wake.wait()
                    continue
                wait = max((due - now) / self._scale, _MIN_WAIT if due <= now else 0.0)
                # a timer that sets the same event: one wait covers "step due" and "new work"
                timer = asyncio.get_running_loop().call_later(wait, self._wake.set)
                try:
                    await self._wake.wait()
                finally:
                    timer.cancel()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the twin's "engine dead" state
            self.failure = exc
            for active in self._active.values():
                active.put(_failed_event(active.request.request_id, self.now()))
            self._active.clear()
            raise


def _aborted_event(active: _Active, index: int, now: float) -> RequestEvent:
    """The final output of a choice that the shutdown ended: what it had, finish_reason abort."""
    req = active.request
    record = RequestRecord(
        request_id=req.request_id,
        arrival=req.arrival,
        scheduled=now,
        first_token=now,
        finished=now,
        prompt_tokens=req.prompt_tokens,
        output_tokens=active.tokens.get(index, 0),
        preemptions=0,
        finish_reason="abort",
        token_times=(),
        index=index,
    )
    return RequestEvent(req.request_id, now, "finished", 0, record, index)


def _failed_event(request_id: str, now: float) -> RequestEvent:
    return RequestEvent(request_id=request_id, time=now, kind="finished", new_tokens=0, record=None)
