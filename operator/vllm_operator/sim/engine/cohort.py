"""The decode cohort: steady decoders advanced in aggregate (docs/vllm-0.33-scheduler.md §1.2).

Once a request has been scheduled in a step that samples a token for it, every later schedule
offers it exactly one token (§1.2 step 3: the gap is 1, placeholders included) until its last
token is scheduled; async scheduling then skips it (§1.2 step 1) and its final update finishes
it. That evolution is known in advance, so the engine keeps such requests in a cohort:
- the cohort's size and context sum give the step time;
- a member needs a new KV block in step x exactly when its computed count before x is a
  multiple of the block size, i.e. when x is in one residue class modulo the block size, so a
  per-class count gives the blocks each step takes;
- a heap on the member's last step says when it leaves;
- the member's own counters are brought up to date ("materialized") only when something needs
  them: it leaves, finishes, is preempted or aborted, or the step cannot be taken in aggregate.

A step can be taken in aggregate when the token budget covers every member and every explicit
request in running-list order, and the KV pool covers every allocation (then no preemption can
happen and order does not matter). Otherwise the cohort is materialized and the reference
passes (passes.py) run request by request. `Engine(token_events=True)` never uses the cohort;
tests compare both paths.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from vllm_operator.sim.engine.passes import async_done, running_tokens
from vllm_operator.sim.engine.state import RUNNING, Entry, Req

if TYPE_CHECKING:
    from vllm_operator.sim.engine.core import EngineCore

Plan = list[tuple[Req, int, int]]  # explicit request, tokens, new blocks


def join_from(core: EngineCore, entries: list[Entry], index: int) -> None:
    """Requests that sample in step `index` decode steadily from step index+1 on."""
    bs = core.bs
    for e in entries:
        r = e.req
        if not e.samples or r.status != RUNNING or r.member:
            continue
        remaining = r.max_tokens - r.out_sched
        if remaining <= 0:
            continue
        start = index + 1
        r.member = True
        r.m_start = start
        r.m_last = index + remaining
        r.m_c0 = r.computed
        core.c_epoch += 1
        r.m_epoch = core.c_epoch
        core.c_cls[(start - r.computed) % bs] += 1
        core.c_n += 1
        core.c_ctx += r.computed
        heapq.heappush(core.c_heap, (r.m_last, r.m_epoch, r))
        core.xrun.remove(r)


def materialize(core: EngineCore, r: Req, *, reinsert: bool = True) -> None:
    """Bring a member's counters up to date and take it out of the cohort."""
    last_sched = min(core.next_index - 1, r.m_last)
    k_sched = last_sched - r.m_start + 1  # cohort steps it was scheduled in
    done = len(core.end_times)
    k_deliv = max(0, min(done, last_sched + 1) - r.m_start)  # ... of which completed
    r.computed = r.m_c0 + k_sched
    r.out_sched += k_sched
    r.outputs += k_deliv
    r.num_tokens += k_deliv
    if core.async_:
        r.placeholders += k_sched - k_deliv
    r.inflight += k_sched - k_deliv
    if k_deliv:
        r.token_times.extend(core.end_times[r.m_start : r.m_start + k_deliv])
    pool = core.pool
    blocks = -(-r.computed // core.bs)
    if blocks > r.nblocks:
        if pool.caching:
            r.blocks.extend([-1] * (blocks - r.nblocks))
        r.nblocks = blocks
    if k_sched and pool.caching:
        # what the last cohort schedule registered: min(computed, num_tokens) at that time,
        # and num_tokens then lagged computed by the one output in flight (async) or not (sync)
        pool.register(r, r.computed - (1 if core.async_ else 0))
    for batch in (core.exec, core.next):  # steps in flight: their token is now explicit
        if batch is not None and done <= batch.index and r.m_start <= batch.index <= last_sched:
            batch.cohort_n -= 1
            batch.entries.append(Entry(r, 1, True))
    core.c_n -= 1
    core.c_ctx -= r.computed
    core.c_cls[(r.m_start - r.m_c0) % core.bs] -= 1
    r.member = False
    if reinsert:
        core.insert_explicit(r)


def materialize_all(core: EngineCore) -> None:
    for r in core.running:
        if r.member:
            materialize(core, r, reinsert=False)
    core.xrun = list(core.running)


def _pop_due(core: EngineCore, upto: int) -> list[Req]:
    heap, due = core.c_heap, []
    while heap and heap[0][0] <= upto:
        _, epoch, r = heapq.heappop(heap)
        if r.member and r.m_epoch == epoch:
            due.append(r)
    return due


def release_due(core: EngineCore, upto: int) -> None:
    """Before scheduling step upto+1: members whose last step is scheduled leave (async)."""
    for r in _pop_due(core, upto):
        materialize(core, r)


def finish_due(core: EngineCore, index: int, finishing: list[Req]) -> None:
    """In update(index): members whose last step this was (sync mode) finish now."""
    for r in _pop_due(core, index):
        materialize(core, r)
        finishing.append(r)


def next_due(core: EngineCore) -> int | None:
    """The last step of the member that leaves first (stale heap entries dropped)."""
    heap = core.c_heap
    while heap:
        last, epoch, r = heap[0]
        if r.member and r.m_epoch == epoch:
            return last
        heapq.heappop(heap)
    return None


def plan_fast(core: EngineCore, lpt: int) -> Plan | None:
    """Pass 1 in aggregate, or None when order would matter (budget or KV short)."""
    budget, running, bs, members = core.budget, core.running, core.bs, core.c_n
    blocks = core.c_cls[core.next_index % bs]
    plan: Plan = []
    used = 0
    for idx, r in enumerate(core.xrun):
        ahead = running.index(r) - idx  # members before r in running order
        avail = budget - ahead - used
        if avail <= 0:
            core.reach.budget_bound = True
            if ahead < members:
                return None  # the loop would stop before reaching some members
            break
        if async_done(core, r):
            continue
        n = running_tokens(core, r, avail, lpt)
        if n <= 0:
            continue
        need = -(-(r.computed + n) // bs) - r.nblocks
        blocks += need
        plan.append((r, n, need))
        used += n
    if used + members > budget:
        core.reach.budget_bound = True
        return None
    if blocks > core.pool.free:
        core.reach.see_step(used + members, False)  # what the plan had to fit (pass 1 may not)
        return None
    return plan


def commit_fast(core: EngineCore, plan: Plan, entries: list[Entry]) -> tuple[int, int]:
    """Apply a feasible plan; returns (budget left, cohort members scheduled)."""
    pool = core.pool
    used = 0
    for r, n, need in plan:
        pool.grow(r, need)
        pool.register(r, min(r.computed + n, r.num_tokens))
        entries.append(Entry(r, n))
        used += n
    members = core.c_n
    pool.take(core.c_cls[core.next_index % core.bs])
    core.c_ctx += members
    return core.budget - used - members, members
