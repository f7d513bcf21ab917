"""Mutable per-request and per-step state of the engine core (docs/vllm-0.33-scheduler.md §0.1).

`Req` carries vLLM's request fields (num_tokens, num_computed_tokens, placeholders, ...) plus
the bookkeeping of the decode cohort (cohort.py): while `member` is set, the counters listed in
`cohort.materialize` are stale and only the cohort's aggregates are current.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vllm_operator.sim.engine.kv import SEGMENT_BITS
from vllm_operator.sim.engine.profiles import StepCoefficients
from vllm_operator.sim.engine.request import RequestRecord

WAITING, RUNNING, PREEMPTED, FINISHED, ABORTED = range(5)


class Req:
    __slots__ = (
        "arrival",
        "blocks",
        "cached_tokens",
        "computed",
        "first_token",
        "index",
        "inflight",
        "key",
        "m_c0",
        "m_epoch",
        "m_last",
        "m_start",
        "max_tokens",
        "member",
        "nblocks",
        "num_tokens",
        "out_sched",
        "outputs",
        "pending_preempt",
        "placeholders",
        "preemptions",
        "priority",
        "prompt",
        "queued",
        "reg_blocks",
        "rid",
        "rseq",
        "scheduled",
        "segments",
        "seq",
        "shared_blocks",
        "status",
        "token_times",
    )

    def __init__(
        self,
        rid: str,
        index: int,
        key: int,
        seq: int,
        arrival: float,
        queued: float,
        prompt: int,
        max_tokens: int,
        priority: int,
        segments: tuple[tuple[int, int], ...],
    ) -> None:
        self.rid = rid
        self.index = index
        self.key = key  # unique per request: its own block-hash namespace
        self.seq = seq
        self.arrival = arrival
        self.queued = queued
        self.prompt = prompt
        self.max_tokens = max_tokens  # effective: min(requested, max_model_len - prompt)
        self.priority = priority
        self.segments = segments  # (blocks covered, hash key) of shared prompt prefixes
        self.shared_blocks = max((covered for covered, _ in segments), default=0)
        self.num_tokens = prompt  # prompt + outputs appended
        self.outputs = 0
        self.out_sched = 0  # outputs once every scheduled step has completed
        self.computed = 0  # num_computed_tokens, advanced at schedule time
        self.placeholders = 0  # async: sampled tokens still in flight
        self.inflight = 0  # scheduled steps not yet processed by update()
        self.nblocks = 0
        self.blocks: list[int] = []
        self.reg_blocks = 0
        self.status = WAITING
        self.scheduled: float | None = None
        self.first_token: float | None = None
        self.token_times: list[float] = []
        self.preemptions = 0
        self.pending_preempt = 0  # PREEMPTED events not yet reported with an output
        self.cached_tokens = 0
        self.rseq = 0  # position in admission order (running-list order)
        self.member = False
        self.m_start = self.m_last = self.m_c0 = self.m_epoch = 0

    def block_hash(self, j: int) -> int:
        if j < self.shared_blocks:
            for covered, key in self.segments:
                if j < covered:
                    return (key << SEGMENT_BITS) | j
        return (self.key << SEGMENT_BITS) | j


class Entry:
    """A request in a step: tokens scheduled, and whether the step samples a token for it."""

    __slots__ = ("n", "req", "samples")

    def __init__(self, req: Req, n: int, samples: bool = False) -> None:
        self.req = req
        self.n = n
        self.samples = samples


class Batch:
    """One scheduled engine step: explicit entries plus `cohort_n` cohort decodes."""

    __slots__ = ("cohort_n", "duration", "end", "entries", "index")

    def __init__(self, index: int, entries: list[Entry], cohort_n: int, duration: float) -> None:
        self.index = index
        self.entries = entries
        self.cohort_n = cohort_n
        self.duration = duration
        self.end = 0.0


@dataclass
class Counters:
    """Cumulative figures; vLLM's counter update points are in docs/vllm-0.33-scheduler.md §6.2."""

    preemptions: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    steps: int = 0
    rejections: dict[str, int] = field(
        default_factory=lambda: {"max_num_queued_reqs": 0, "max_num_queued_tokens": 0}
    )
    success: dict[str, int] = field(default_factory=lambda: {"length": 0, "stop": 0})
    iteration_tokens: list[int] = field(default_factory=list)


def build_record(r: Req, t: float, coeffs: StepCoefficients) -> RequestRecord:
    """The finished request's record; `t` is the engine timestamp of its final output."""
    assert r.scheduled is not None and r.first_token is not None
    return RequestRecord(
        request_id=r.rid,
        arrival=r.arrival,
        scheduled=r.scheduled,
        first_token=r.first_token,
        finished=t,
        prompt_tokens=r.prompt,
        output_tokens=r.outputs,
        preemptions=r.preemptions,
        finish_reason="length",
        token_times=tuple(r.token_times),
        index=r.index,
        queued=r.queued,
        cached_tokens=r.cached_tokens,
        output_delay=coeffs.output_delay,
        finish_delay=coeffs.finish_overhead,
        priority=r.priority,
    )
