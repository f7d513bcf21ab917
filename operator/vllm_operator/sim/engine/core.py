"""The engine core: queues, KV pool, schedule() and update() (docs/vllm-0.33-scheduler.md §1-§4).

Time is passed in. One engine step is a `Batch`; in async mode (§4) the GPU runs steps back to
back: when step k ends, step k+1 (scheduled when step k started) starts at once, update(k) runs,
then step k+2 is scheduled from the resulting state. In sync mode update(k) is followed by
scheduling step k+1. Arrivals are drained only at step ends, which gives the one-step lags of
§4: a request arriving during step k is first considered for step k+2 (async) or k+1 (sync).
"""

from __future__ import annotations

import bisect
import random
from collections import deque
from collections.abc import Callable

from vllm_operator.sim.engine import cohort
from vllm_operator.sim.engine.config import ResolvedConfig
from vllm_operator.sim.engine.kv import BlockPool
from vllm_operator.sim.engine.passes import pass1, pass2
from vllm_operator.sim.engine.profiles import StepCoefficients
from vllm_operator.sim.engine.queues import FcfsQueue, PriorityQueue
from vllm_operator.sim.engine.reach import Reach
from vllm_operator.sim.engine.request import RequestEvent
from vllm_operator.sim.engine.state import (
    ABORTED,
    FINISHED,
    PREEMPTED,
    RUNNING,
    Batch,
    Counters,
    Entry,
    Req,
    build_record,
)
from vllm_operator.sim.engine.steptime import StepTimer

BatchHook = Callable[[float, Batch], None]


class EngineCore:
    def __init__(
        self,
        res: ResolvedConfig,
        steptime: StepTimer,
        coeffs: StepCoefficients,
        rng: random.Random,
        *,
        use_cohort: bool,
    ) -> None:
        self.res = res
        self.steptime = steptime
        self.coeffs = coeffs
        self.rng = rng
        self.bs = res.block_size
        self.mml = res.max_model_len
        self.budget = res.max_num_batched_tokens
        self.active_cap = res.max_num_active_seqs
        self.lpt = res.long_prefill_token_threshold
        self.chunked = res.enable_chunked_prefill
        self.reserve_full = res.scheduler_reserve_full_isl
        self.wm_blocks = int(res.watermark * res.num_gpu_blocks)
        self.fcfs = res.scheduling_policy == "fcfs"
        self.async_ = res.async_scheduling
        self.pool = BlockPool(res.num_gpu_blocks, self.bs, caching=res.enable_prefix_caching)
        self.running: list[Req] = []
        self.waiting: FcfsQueue[Req] | PriorityQueue[Req] = (
            FcfsQueue() if self.fcfs else PriorityQueue()
        )
        self.pending: deque[Req] = deque()  # accepted by the API server, not yet in `waiting`
        self.exec: Batch | None = None  # the step on the GPU
        self.next: Batch | None = None  # async: the step scheduled behind it
        self.next_index = 0
        self.end_times: list[float] = []  # end time of every completed step, by index
        self.rseq = 0
        self.p2_block: str | None = None
        self.reach = Reach()  # what the budget comparisons saw (reach.py)
        # decode cohort (cohort.py); `xrun` = running requests outside it, in running order
        self.use_cohort = use_cohort
        self.c_n = 0
        self.c_ctx = 0
        self.c_cls = [0] * self.bs
        self.c_heap: list[tuple[int, int, Req]] = []
        self.c_epoch = 0
        self.xrun: list[Req] = []
        # outputs
        self.token_events = not use_cohort
        self.events: list[RequestEvent] = []
        self.counters = Counters()
        self.fe_inflight = 0  # API server: unfinished requests (max_num_queued_reqs)
        self.fe_prefill = 0  # API server: prompt tokens before the first output
        self.gauges = (0, 0, 0.0)  # running, waiting, kv usage at the last step end
        self.kv_area = 0.0
        self.kv_t = 0.0
        self.kv_peak = 0.0
        self.hook: BatchHook | None = None
        self.decode_steps: dict[int, Callable[[int], float]] = {}  # fastloop's cache

    # ---------------------------------------------------------------- schedule
    def schedule(self, now: float) -> Batch | None:
        """One schedule() call at `now`; returns the step, or None if it would be empty."""
        index = self.next_index
        if self.c_n:
            cohort.release_due(self, index - 1)
        lpt = self.lpt if len(self.running) + len(self.waiting) > 1 else 0
        entries: list[Entry] = []
        budget = self.budget
        members = 0
        preempted = False
        plan = cohort.plan_fast(self, lpt) if self.c_n else None
        if plan is not None:
            budget, members = cohort.commit_fast(self, plan, entries)
        else:
            if self.c_n:
                cohort.materialize_all(self)
            budget, preempted = pass1(self, now, entries, budget, lpt)
        if preempted:
            self.p2_block = None  # no admission in a step with a preemption (§3)
        else:
            budget = pass2(self, now, entries, budget, lpt)
        # a pass that ended on the budget depends on its value, and so does one whose
        # preemptions gave a victim's tokens back (the budget's low point is not its end)
        self.reach.see_step(self.budget - budget, budget <= 0 or (preempted and not self.fcfs))
        if not entries and not members:
            return None
        return self._finalize(index, entries, members, now)

    def _finalize(self, index: int, entries: list[Entry], members: int, now: float) -> Batch:
        prefill = decode = ctx = attn_p = attn_d = 0
        async_ = self.async_
        for e in entries:
            r, n = e.req, e.n
            c = r.computed
            r.computed = c + n
            ctx += c + n
            if n == 1:
                decode += 1
                attn_d += 2 * c + 2
            else:
                prefill += n
                attn_p += n * (2 * c + n + 1)
            if async_:  # §1.4: a non-prefill-chunk request gets an output placeholder
                e.samples = r.computed >= r.num_tokens + r.placeholders
                if e.samples:
                    r.placeholders += 1
            else:
                e.samples = r.computed >= r.num_tokens
            r.inflight += 1
            if e.samples:
                r.out_sched += 1
        if members:
            decode += members
            ctx += self.c_ctx
            attn_d += 2 * self.c_ctx
        duration = self.steptime.duration(
            len(entries) + members, prefill, decode, ctx, attn_p, attn_d
        )
        batch = Batch(index, entries, members, self.noisy(duration))
        self.next_index = index + 1
        if self.use_cohort:
            cohort.join_from(self, entries, index)
        if self.hook is not None:
            self.hook(now, batch)
        return batch

    def noisy(self, duration: float) -> float:
        noise = self.coeffs.step_noise
        if noise > 0:
            duration *= max(0.1, 1.0 + self.rng.gauss(0.0, noise))
        return duration

    def admit(self, r: Req, now: float, hit_blocks: int, new_blocks: int, n: int) -> None:
        """§1.3 step 10: pop from waiting (done by the caller), append to running."""
        pool = self.pool
        if pool.caching:
            pool.touch(r, hit_blocks)
        pool.grow(r, new_blocks)
        hit = hit_blocks * self.bs
        r.computed = hit
        pool.register(r, min(hit + n, r.num_tokens))
        r.status = RUNNING
        r.rseq = self.rseq
        self.rseq += 1
        self.running.append(r)
        if self.use_cohort:
            self.xrun.append(r)
        if r.scheduled is None:  # first admission: SCHEDULED event and prefix-cache counters
            r.scheduled = now
            r.cached_tokens = hit
            if pool.caching:
                self.counters.prefix_queries += r.num_tokens
                self.counters.prefix_hits += hit

    def preempt(self, r: Req) -> None:
        """§3: free the blocks, recompute from scratch later, back to the front of waiting."""
        if r.member:
            cohort.materialize(self, r)
        self.pool.release(r)
        r.computed = 0
        r.placeholders = 0
        r.status = PREEMPTED
        r.preemptions += 1
        r.pending_preempt += 1
        self.running.remove(r)
        if self.use_cohort:
            self.xrun.remove(r)
        self.waiting.push_front(r)

    # ------------------------------------------------------------------ update
    def update(self, batch: Batch, t: float) -> None:
        """update_from_output for a completed step: outputs, stop checks, frees (§1.4, §8)."""
        self.end_times.append(t)
        counters = self.counters
        generated = iteration = batch.cohort_n
        finishing: list[Req] = []
        delay = self.coeffs.output_delay
        for e in batch.entries:
            r = e.req
            r.inflight -= 1
            if r.status >= FINISHED or not e.samples:
                continue
            r.num_tokens += 1
            r.outputs += 1
            if r.placeholders:
                r.placeholders -= 1
            r.token_times.append(t)
            generated += 1
            iteration += 1
            if r.outputs == 1:  # first output: TTFT, prompt tokens, token-limit count (§6.2)
                r.first_token = t
                self.fe_prefill -= r.prompt
                counters.prompt_tokens += r.prompt
                iteration += r.prompt
            if r.pending_preempt:  # the PREEMPTED event rides on the next output (§3)
                counters.preemptions += r.pending_preempt
                r.pending_preempt = 0
            if self.token_events:
                self.events.append(RequestEvent(r.rid, t + delay, "tokens", 1, None, r.index))
            if r.outputs >= r.max_tokens:
                finishing.append(r)
        if self.c_n:
            cohort.finish_due(self, batch.index, finishing)
        counters.generation_tokens += generated
        counters.iteration_tokens.append(iteration)
        counters.steps += 1
        if len(finishing) > 1:
            finishing.sort(key=self._running_pos)
        for r in finishing:
            self.finish(r, t)

    def _running_pos(self, r: Req) -> int:
        # finish (and so free blocks) in running-list order, whichever path scheduled them
        return self.running.index(r) if r.status == RUNNING else len(self.running)

    def finish(self, r: Req, t: float) -> None:
        self.pool.release(r)
        if r.status == RUNNING:
            self.running.remove(r)
            if self.use_cohort:
                self.xrun.remove(r)
        else:  # a preempted request whose in-flight output was its last one
            self.waiting.remove(r)
        r.status = FINISHED
        self.fe_inflight -= 1
        self.counters.success["length"] += 1
        record = build_record(r, t, self.coeffs)
        end = t + self.coeffs.output_delay + self.coeffs.finish_overhead
        self.events.append(RequestEvent(r.rid, end, "finished", 0, record, r.index))

    def drop(self, r: Req) -> None:
        """A client abort: remove the request wherever it is; nothing is recorded (§6.2)."""
        if r.status >= FINISHED:
            return
        if r.member:
            cohort.materialize(self, r)
        if r.status == RUNNING:
            self.pool.release(r)
            self.running.remove(r)
            if self.use_cohort:
                self.xrun.remove(r)
        elif r in self.pending:
            self.pending.remove(r)
        else:
            self.waiting.remove(r)
        r.status = ABORTED
        self.fe_inflight -= 1
        if r.outputs == 0:
            self.fe_prefill -= r.prompt
        self.p2_block = None  # the waiting queue changed: the fast loop must rescan it

    # ------------------------------------------------------------------ gauges
    def account_kv(self, t: float) -> None:
        """Integrate KV usage over time up to t (usage only changes at step boundaries)."""
        if t > self.kv_t:
            self.kv_area += self.pool.usage * (t - self.kv_t)
            self.kv_t = t

    def snapshot(self) -> None:
        # vLLM's gauges are made at the end of update_from_output (§6.1)
        self.gauges = (len(self.running), len(self.waiting), self.pool.usage)

    def drain(self, t: float) -> None:
        """The engine loop drains new requests into `waiting` before each schedule() (§4)."""
        pending = self.pending
        while pending and pending[0].queued <= t:
            self.waiting.push(pending.popleft())

    def insert_explicit(self, r: Req) -> None:
        bisect.insort(self.xrun, r, key=_rseq)


def _rseq(r: Req) -> int:
    return r.rseq
