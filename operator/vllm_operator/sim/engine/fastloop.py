"""Runs consecutive pure-cohort steps without the general event machinery.

A step is "pure" when every running request is a cohort member and the waiting scan stopped for
a reason that decoding alone cannot change (passes.pass2 records it): the slot cap, the token
budget, or, under FCFS where a new arrival joins the back, a KV or no-chunk block at the head.
While no member leaves, the KV pool covers each step's new blocks, and no arrival could change
admission, each step end is: update (every member gets a token), gauges, drain arrivals,
schedule the same members again. This loop does exactly what `Engine._event` would do in that
state, at a fraction of the cost, which is what lets an hour of traffic run in seconds.
"""

from __future__ import annotations

from vllm_operator.sim.engine import cohort
from vllm_operator.sim.engine.core import EngineCore
from vllm_operator.sim.engine.state import Batch

_PERSISTENT_ANY = ("cap", "budget")  # stay true whatever arrives
_PERSISTENT_FCFS = ("kv", "nochunk")  # the head of a FCFS queue does not change on arrival


def _pure(core: EngineCore) -> bool:
    """Only cohort members run, in every step in flight, and the waiting scan is stuck."""
    ex, nx = core.exec, core.next
    if not core.c_n or core.xrun or ex is None or ex.entries or core.p2_block is None:
        return False
    return not core.async_ or (nx is not None and not nx.entries)


def run(core: EngineCore, horizon: float) -> int:  # noqa: C901 - one hot loop, inlined on purpose
    """Process pure step ends up to `horizon`; returns how many (0: not applicable now)."""
    if not _pure(core):
        return 0
    ex, nx = core.exec, core.next
    assert ex is not None
    members = core.c_n
    block = core.p2_block
    arrivals_ok = block in _PERSISTENT_ANY or (core.fcfs and block in _PERSISTENT_FCFS)
    due = cohort.next_due(core)
    last_x = due + 1 if due is not None else float("inf")  # step due+1 is no longer pure
    step = core.decode_steps.get(members)
    if step is None:
        step = core.decode_steps[members] = core.steptime.decode_step(members)
    pool, cls, bs, pending, async_, hook = (
        core.pool,
        core.c_cls,
        core.bs,
        core.pending,
        core.async_,
        core.hook,
    )
    noisy = core.noisy
    end_times = core.end_times
    running, waiting = len(core.running), len(core.waiting)
    usable, usage, peak = pool.usable, pool.usage, core.kv_peak
    area, kv_t = core.kv_area, core.kv_t
    gauge_waiting, gauge_usage = core.gauges[1], core.gauges[2]
    ctx, x = core.c_ctx, core.next_index
    # the step on the GPU (ends at ex_end) and, async, the one queued behind it (nx_dur)
    ex_end, ex_dur, ex_idx = ex.end, ex.duration, ex.index
    nx_dur, nx_idx = (nx.duration, nx.index) if nx is not None else (0.0, -1)
    done = 0
    # Engine._event's update/snapshot/drain/schedule for a pure step, with the per-request
    # work gone and the float arithmetic kept operation for operation
    while True:
        t = ex_end
        need = cls[x % bs]
        if (
            t > horizon
            or x >= last_x
            or need > pool.free_unhashed + len(pool.cached)
            or (not arrivals_ok and pending and pending[0].queued <= t)
        ):
            break
        if t > kv_t:
            area += usage * (t - kv_t)
            kv_t = t
        if async_:  # the queued step starts now
            ex_idx, ex_dur, ex_end = nx_idx, nx_dur, t + nx_dur
        end_times.append(t)  # update: every member gets its token at t
        gauge_waiting, gauge_usage = waiting, usage
        if pending and pending[0].queued <= t:
            core.drain(t)
            waiting = len(core.waiting)
        if need:
            pool.take(need)
            usage = 1.0 - (pool.free_unhashed + len(pool.cached)) / usable
            peak = max(peak, usage)
        ctx += members
        duration = noisy(step(ctx))
        if async_:
            nx_idx, nx_dur = x, duration
        else:
            ex_idx, ex_dur, ex_end = x, duration, t + duration
        if hook is not None:
            batch = Batch(x, [], members, duration)
            batch.end = 0.0 if async_ else ex_end
            hook(t, batch)
        x += 1
        done += 1
    if done:
        counters = core.counters
        counters.generation_tokens += members * done
        counters.steps += done
        counters.iteration_tokens.extend([members] * done)
        core.c_ctx, core.next_index = ctx, x
        core.kv_area, core.kv_t, core.kv_peak = area, kv_t, peak
        core.gauges = (running, gauge_waiting, gauge_usage)
        ex.index, ex.duration, ex.end = ex_idx, ex_dur, ex_end
        if nx is not None:
            nx.index, nx.duration = nx_idx, nx_dur
    return done
