"""The two scheduling passes of `Scheduler.schedule()` (docs/vllm-0.33-scheduler.md §1.2, §1.3, §8).

These functions are the reference path: they walk the running list request by request, exactly
as vLLM does. The cohort fast path (cohort.py) must produce the same steps; a differential test
holds the two together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vllm_operator.sim.engine.state import RUNNING, Entry, Req

if TYPE_CHECKING:
    from vllm_operator.sim.engine.core import EngineCore


def _prio_key(r: Req) -> tuple[int, float]:
    return (r.priority, r.arrival)


def async_done(core: EngineCore, r: Req) -> bool:
    """§1.2 step 1: the tokens in flight already take the request to max_tokens."""
    return (
        core.async_
        and r.placeholders > 0
        and r.computed + 2 - r.placeholders >= r.prompt + r.max_tokens
    )


def running_tokens(core: EngineCore, r: Req, budget: int, lpt: int) -> int:
    """§1.2 step 3: tokens offered to a running request (<= 0 means skip it)."""
    n = r.num_tokens + r.placeholders - r.computed
    if 0 < lpt < n:
        n = lpt
    if n > budget:
        core.reach.budget_bound = True
    return min(n, budget, core.mml - r.computed - 1)


def pass1(
    core: EngineCore, now: float, entries: list[Entry], budget: int, lpt: int
) -> tuple[int, bool]:
    """RUNNING requests in list order; preempt by recompute when KV runs out (§1.2, §3)."""
    running, pool, bs = core.running, core.pool, core.bs
    preempted = False
    i = 0
    while i < len(running) and budget > 0:
        r = running[i]
        if async_done(core, r):
            i += 1
            continue
        n = running_tokens(core, r, budget, lpt)
        if n <= 0:  # `continue`, not `break` (§1.2 step 4)
            i += 1
            continue
        need = -(-(r.computed + n) // bs) - r.nblocks
        while need > pool.free:
            victim = running[-1] if core.fcfs else max(running, key=_prio_key)
            at = running.index(victim)
            if not core.fcfs:
                # a victim already scheduled this step gives its tokens back (§3)
                for k, e in enumerate(entries):
                    if e.req is victim:
                        budget += e.n
                        del entries[k]
                        break
            core.preempt(victim)
            preempted = True
            if victim is r:
                break
            if at < i:
                i -= 1
        if r.status != RUNNING:
            if core.fcfs:
                break  # nothing further from `running` this step
            continue  # priority: r left the list, running[i] is the next request
        pool.grow(r, need)
        pool.register(r, min(r.computed + n, r.num_tokens))
        entries.append(Entry(r, n))
        budget -= n
        i += 1
    return budget, preempted


def _kv_block(evictable: int) -> str | None:
    # A KV block persists while decodes only consume blocks, unless the head's hit includes
    # evictable cached blocks: evicting them shrinks what a capped chunk has to pull back out.
    return "kv" if not evictable else None


def pass2(core: EngineCore, now: float, entries: list[Entry], budget: int, lpt: int) -> int:
    """Admit WAITING/PREEMPTED requests until one does not fit: head-of-line blocking (§1.3).

    Records in `core.p2_block` why the scan stopped, for the cohort's fast loop: "cap", "kv",
    "nochunk" and "budget" stay true while running requests only decode; "empty" ends with the
    next arrival; None means the outcome may change on its own (a skipped request, or a KV block
    that evictions could lift).
    """
    waiting, running, pool, bs = core.waiting, core.running, core.pool, core.bs
    skipped: list[Req] = []
    reason: str | None = "budget"
    passed = -1  # the most running when the cap let the scan go on (reach.py)
    while budget > 0:
        if not len(waiting):
            reason = "empty"
            break
        if len(running) >= core.active_cap:
            reason = "cap"
            break
        passed = len(running)
        r = waiting.peek()
        if r.inflight:  # stale output of an async preemption not drained yet (§1.3 step 4)
            skipped.append(waiting.pop())
            continue
        hit_blocks, evictable = pool.lookup(r, r.num_tokens) if pool.caching else (0, 0)
        hit = hit_blocks * bs
        n = r.num_tokens - hit
        if 0 < lpt < n:
            n = lpt
        if n > budget:
            core.reach.budget_bound = True
            if not core.chunked:
                reason = "nochunk"
                break
            n = budget
        wm = core.wm_blocks if running else 0
        free = pool.free
        if core.reserve_full:
            need_full = -(-min(r.num_tokens, core.mml) // bs) - hit_blocks + evictable
            if need_full + wm > free:
                reason = _kv_block(evictable)
                break
        new = -(-(hit + n) // bs) - hit_blocks
        if new + evictable + wm > free:
            reason = _kv_block(evictable)
            break
        waiting.pop()
        core.admit(r, now, hit_blocks, new, n)
        entries.append(Entry(r, n))
        budget -= n
    core.reach.see_cap(passed, len(running) if reason == "cap" else None)
    if skipped:
        waiting.restore_front(skipped)
        reason = None
    core.p2_block = reason
    return budget
