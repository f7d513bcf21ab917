"""The vLLM 0.33 twin's engine: API-server admission in front of the engine core, in virtual time.

Pure: no I/O and no clock; every call takes the current virtual time. The caller alternates
`advance(now)` (run every step that ends by `now`, collect events) with `submit`/`abort` at
`now`, and sleeps (real time) or jumps (virtual time) to `next_event_time()`.

Timing of a request (docs/twin-calibration.md §2.3, docs/vllm-0.33-scheduler.md §6.3, §8):
- `submit(now)`: API arrival; the admission check runs here (§5), counting the request from now;
- the API server needs `api_request_cost` of its CPU per request, `api_chat_cost` more for a
  chat request (the chat template, the messages' tokenisation); the requests it holds share
  that CPU (processor sharing, apiserver.py), so a burst reaches the engine late and together;
- the engine core sees it `api_overhead` (alpha0) after the API server is done and queues it;
  it is first scheduled at the next schedule() after that, i.e. at a step end (§4 async lag);
- outputs carry the step's end time (engine clock); the client sees each `output_delay`
  (alpha2) later, the final one `finish_overhead` (alpha1) later still.

Simplifications (the rest follows the scheduler page step by step, see passes.py/core.py):
- both admission checks of §5 (before and after tokenization) happen at `submit`; tokenization
  and IPC take `api_overhead` and nothing else can interleave;
- the frontend counts drop when the engine emits the output, not `output_delay` later;
- `abort` frees the request at once (vLLM drains the ABORT at its next loop iteration);
- requests never stop early: they produce exactly max_tokens (capped by max_model_len), so
  finish_reason is always "length" and there is no EOS slot waste (§4);
- prefix caching hits only where requests share content: n>1 siblings share their prompt, and
  requests with the same `prefix_id` share `prefix_tokens`; a preempted request hits its own
  blocks until they are evicted (§2.4, §8.3);
- step time: sync mode adds no CPU overhead between steps (its size is not determined, §9).
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

from vllm_operator.sim.engine import fastloop
from vllm_operator.sim.engine.apiserver import ApiServer
from vllm_operator.sim.engine.config import EngineConfig, ResolvedConfig, resolve_config
from vllm_operator.sim.engine.core import BatchHook, EngineCore
from vllm_operator.sim.engine.profiles import GpuProfile, ModelProfile, StepCoefficients
from vllm_operator.sim.engine.reach import Reach
from vllm_operator.sim.engine.request import (
    BACKLOG_MESSAGE,
    BUSY_MESSAGE,
    InvalidRequestError,
    Rejected,
    RequestEvent,
    RequestRecord,
    SimRequest,
)
from vllm_operator.sim.engine.state import FINISHED, Req
from vllm_operator.sim.engine.stats import EngineStats
from vllm_operator.sim.engine.steptime import StepTimeModel, StepTimer


def _before(now: float) -> float:
    return math.nextafter(now, -math.inf)


__all__ = [
    "Engine",
    "EngineConfig",
    "EngineStats",
    "InvalidRequestError",
    "Rejected",
    "RequestEvent",
    "RequestRecord",
    "ResolvedConfig",
    "SimRequest",
]


class Engine:
    """One vLLM server (one engine, one API server) on one GPU profile and model profile.

    `token_events=False` drops the per-output "tokens" events (records keep every token time)
    and lets steady decoding run in aggregate (cohort.py): the virtual-time runner uses it.
    `seed` drives the optional step-time noise (`StepCoefficients.step_noise`, 0 by default).
    """

    def __init__(
        self,
        cfg: EngineConfig,
        gpu: GpuProfile,
        model: ModelProfile,
        seed: int = 0,
        *,
        coeffs: StepCoefficients | None = None,
        token_events: bool = True,
        step_time: StepTimer | None = None,
    ) -> None:
        self.coeffs = coeffs or StepCoefficients()
        self._res = resolve_config(cfg, gpu, model, self.coeffs)
        timer = step_time or StepTimeModel(
            gpu,
            model,
            tp=self._res.tensor_parallel_size,
            kv_bytes_per_token=self._res.kv_bytes_per_token,
            coeffs=self.coeffs,
        )
        self._core = EngineCore(
            self._res, timer, self.coeffs, random.Random(seed), use_cohort=not token_events
        )
        self._buffer: list[RequestEvent] = []
        self._active: dict[str, list[Req]] = {}
        self._keys = 0
        self._prefix_keys: dict[str, int] = {}
        self._api: ApiServer[list[Req]] = ApiServer()  # requests the API server works on

    @property
    def resolved(self) -> ResolvedConfig:
        return self._res

    def set_batch_hook(self, hook: BatchHook | None) -> None:
        """Called with (schedule time, step) for every scheduled step: for tests and tracing."""
        self._core.hook = hook

    @property
    def idle(self) -> bool:
        core = self._core
        return (
            core.exec is None
            and not core.pending
            and not core.running
            and not core.waiting
            and not self._api
        )

    # ----------------------------------------------------------------- time
    def next_event_time(self) -> float | None:
        engine, api = self._engine_next(), self._api.next_finish()
        if engine is None or api is None:
            return api if engine is None else engine
        return min(engine, api)

    def _engine_next(self) -> float | None:
        core = self._core
        if core.exec is not None:
            return core.exec.end
        if core.pending:
            return core.pending[0].queued
        return None

    def advance(self, now: float) -> list[RequestEvent]:
        """Run every step that ends at or before `now`; events in time order."""
        self._run(now, inclusive=True)
        core = self._core
        events = self._buffer + core.events
        self._buffer = []
        core.events = []
        for event in events:
            if event.kind == "finished":
                self._forget(event.request_id)
        return events

    def _run(self, now: float, *, inclusive: bool) -> None:
        core = self._core
        horizon = now if inclusive else _before(now)
        while True:
            api = self._api.next_finish()
            if api is not None and api <= horizon:
                self._api_done(api)  # requests the API server hands on, before any step ends
                continue
            t = self._engine_next()
            if t is None or t > horizon:
                break
            if core.use_cohort and fastloop.run(core, horizon):
                continue
            self._event(t)

    def _api_done(self, now: float) -> None:
        """The requests the API server finished by `now` reach the engine core `api_overhead`
        after that (IPC and the rest of alpha0), in the order they finished."""
        self._queue(self._api.take(now))

    def _queue(self, done: list[tuple[float, list[Req]]]) -> None:
        pending, overhead = self._core.pending, self.coeffs.api_overhead
        for finished, reqs in done:
            for r in reqs:
                r.queued = finished + overhead
            pending.extend(reqs)

    def _catch_up(self, now: float) -> None:
        """Before a submit/abort at `now`: run what happened strictly before it.

        Events at exactly `now` stay for the next advance(), so requests submitted at one
        instant reach an idle engine together, as they would in one engine-loop iteration.
        """
        self._run(now, inclusive=False)
        self._buffer.extend(self._core.events)
        self._core.events = []

    def _event(self, t: float) -> None:
        core = self._core
        core.account_kv(t)
        done = core.exec
        if done is not None and done.end <= t:
            core.exec, core.next = core.next, None
            if core.exec is not None:
                core.exec.end = t + core.exec.duration
            core.update(done, t)
            core.snapshot()
        core.drain(t)
        if core.exec is None:
            batch = core.schedule(t)
            if batch is not None:
                batch.end = t + batch.duration
                core.exec = batch
        if core.async_ and core.exec is not None and core.next is None:
            core.next = core.schedule(t)
        core.kv_peak = max(core.kv_peak, core.pool.usage)

    def _forget(self, request_id: str) -> None:
        reqs = self._active.get(request_id)
        if reqs is not None and all(r.status >= FINISHED for r in reqs):
            del self._active[request_id]

    # ------------------------------------------------------------- requests
    def submit(self, req: SimRequest, now: float) -> Rejected | None:
        """The API server takes a request at `now`: 503 (Rejected) or accepted (None).

        Raises InvalidRequestError for what vLLM answers with 400.
        """
        self._catch_up(now)
        if req.n < 1 or req.max_tokens < 1:
            raise InvalidRequestError(f"n and max_tokens must be >= 1 (request {req.request_id})")
        known = self._active.get(req.request_id)
        if known is not None and any(r.status < FINISHED for r in known):
            raise InvalidRequestError(f"request id {req.request_id!r} is already in flight")
        rejected = self.check_admission(req.n, now)
        if rejected is not None:
            return rejected
        mml = self._res.max_model_len
        if not 1 <= req.prompt_tokens < mml:
            raise InvalidRequestError(
                f"The decoder prompt (length {req.prompt_tokens}) is longer than the maximum "
                f"model length of {mml}. Make sure that `max_model_len` is no smaller than the "
                "number of text tokens plus one."
            )
        children = self._children(req, now)
        core = self._core
        work = self.coeffs.api_request_cost + (self.coeffs.api_chat_cost if req.chat else 0.0)
        if work > 0:
            self._queue(self._api.add(now, work, children))
        else:
            self._queue([*self._api.take(now), (now, children)])
        core.fe_inflight += req.n
        core.fe_prefill += req.n * req.prompt_tokens
        self._active[req.request_id] = children
        return None

    def check_admission(self, n: int, now: float) -> Rejected | None:
        """vLLM's `AsyncLLM.check_admission` at `now`, a rejection counted: its serving layer runs
        it before it renders a request's prompts (`_preflight`), and `add_request` again for each
        prompt, which `submit` does."""
        self._catch_up(now)
        rejected = self._admission(n)
        if rejected is not None:
            self._core.counters.rejections[rejected.reason] += 1
        return rejected

    def _admission(self, n: int) -> Rejected | None:
        # vllm/v1/engine/async_llm.py check_admission: the request limit is checked first (§5)
        core, res, reach = self._core, self._res, self._core.reach
        demand, queued = core.fe_inflight + n, core.fe_prefill
        if res.max_num_queued_reqs is not None and demand > res.max_num_queued_reqs:
            reach.refuse_requests(demand)
            return Rejected("max_num_queued_reqs", BUSY_MESSAGE)
        reach.admit_requests(demand)
        if res.max_num_queued_tokens is not None and queued >= res.max_num_queued_tokens:
            reach.refuse_tokens(queued)
            return Rejected("max_num_queued_tokens", BACKLOG_MESSAGE)
        reach.admit_tokens(queued)
        return None

    def _children(self, req: SimRequest, now: float) -> list[Req]:
        bs = self._res.block_size
        segments: list[tuple[int, int]] = []
        if req.prefix_id is not None and req.prefix_tokens > 0:
            key = self._prefix_keys.get(req.prefix_id)
            if key is None:
                key = self._prefix_keys[req.prefix_id] = self._new_key()
            segments.append((min(req.prefix_tokens, req.prompt_tokens) // bs, key))
        if req.n > 1:  # siblings share the whole prompt
            segments.append((req.prompt_tokens // bs, self._new_key()))
        max_tokens = min(req.max_tokens, self._res.max_model_len - req.prompt_tokens)
        queued = now + self.coeffs.api_overhead  # set again when the API server is done
        return [
            Req(
                req.request_id,
                i,
                self._new_key(),
                self._keys,
                now,
                queued,
                req.prompt_tokens,
                max_tokens,
                req.priority,
                tuple(segments),
            )
            for i in range(req.n)
        ]

    def _new_key(self) -> int:
        self._keys += 1
        return self._keys

    def abort(self, request_id: str, now: float) -> None:
        """The client went away: drop the request wherever it is (nothing recorded, §6.2)."""
        self._catch_up(now)
        reqs = self._active.pop(request_id, None)
        if reqs is None:
            return
        self._api_done(now)
        if self._api.remove(reqs):
            self._core.pending.extend(reqs)  # where drop() removes a request not yet queued
        for r in reqs:
            self._core.drop(r)

    # ---------------------------------------------------------------- stats
    def reach(self) -> Reach:
        """What this engine's budget comparisons have seen so far (reach.py)."""
        return replace(self._core.reach)

    def stats(self) -> EngineStats:
        core, res = self._core, self._res
        running, waiting, kv = core.gauges
        c = core.counters
        iterations = tuple(c.iteration_tokens)
        c.iteration_tokens.clear()
        return EngineStats(
            num_running=running,
            num_waiting=waiting,
            # in scope no request waits for a grammar, LoRA slot or KV transfer (§0.2)
            waiting_by_reason={"capacity": waiting, "deferred": 0},
            kv_usage=kv,
            num_gpu_blocks=res.num_gpu_blocks,
            kv_cache_size_tokens=res.kv_cache_size_tokens,
            preemptions=c.preemptions,
            prompt_tokens=c.prompt_tokens,
            generation_tokens=c.generation_tokens,
            prefix_cache_queries=c.prefix_queries,
            prefix_cache_hits=c.prefix_hits,
            rejections=dict(c.rejections),
            request_success=dict(c.success),
            iteration_tokens=iterations,
            num_steps=c.steps,
            kv_usage_peak=core.kv_peak,
            kv_usage_seconds=core.kv_area,
            frontend_unfinished=core.fe_inflight,
            frontend_prefill_tokens=core.fe_prefill,
        )
