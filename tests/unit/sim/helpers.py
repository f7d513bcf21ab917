"""Small, hand-computable engine set-ups for the scheduler tests.

Steps take a constant STEP seconds and the API-side delays are zero, so a request submitted at
t is queued at t, and step k of a busy engine ends at (k+1)*STEP. Tiny KV pools come from
vLLM's own `--num-gpu-blocks-override`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from vllm_operator.sim.catalog import load_catalog
from vllm_operator.sim.engine import (
    ConstantStepTime,
    Engine,
    EngineConfig,
    RequestEvent,
    RequestRecord,
    SimRequest,
    StepCoefficients,
)
from vllm_operator.sim.engine.state import Batch

CATALOG = load_catalog()
H100 = CATALOG.gpu("H100-80GB")
LLAMA8 = CATALOG.model("Llama-3.1-8B")
NO_DELAYS = StepCoefficients(api_overhead=0.0, output_delay=0.0, finish_overhead=0.0)
STEP = 0.01


@dataclass
class Step:
    index: int
    time: float  # when schedule() ran
    tokens: dict[str, int]  # request id (with :index for n>1 children) -> tokens scheduled
    members: int  # cohort decodes not listed in tokens


@dataclass
class Run:
    engine: Engine
    steps: list[Step] = field(default_factory=list)
    events: list[RequestEvent] = field(default_factory=list)

    def records(self) -> dict[str, RequestRecord]:
        out = {}
        for e in self.events:
            if e.record is not None:
                key = e.request_id if e.record.index == 0 else f"{e.request_id}:{e.index}"
                out[key] = e.record
        return out

    def step_tokens(self) -> list[dict[str, int]]:
        return [s.tokens for s in self.steps]


def tiny_engine(**flags: Any) -> Run:
    """An engine with EngineConfig `flags` over small defaults; `token_events` is passed on."""
    token_events = bool(flags.pop("token_events", True))
    defaults: dict[str, Any] = {
        "max_model_len": 1024,
        "num_gpu_blocks_override": 1000,
        "enable_prefix_caching": False,
        "async_scheduling": False,
    }
    cfg = EngineConfig(**{**defaults, **flags})
    engine = Engine(
        cfg,
        H100,
        LLAMA8,
        coeffs=NO_DELAYS,
        token_events=token_events,
        step_time=ConstantStepTime(STEP),
    )
    run = Run(engine)

    def hook(now: float, batch: Batch) -> None:
        tokens = {}
        for e in batch.entries:
            key = e.req.rid if e.req.index == 0 else f"{e.req.rid}:{e.req.index}"
            tokens[key] = e.n
        run.steps.append(Step(batch.index, round(now, 9), tokens, batch.cohort_n))

    engine.set_batch_hook(hook)
    return run


def req(rid: str, prompt: int, max_tokens: int, **kw: Any) -> SimRequest:
    return SimRequest(rid, 0.0, prompt, max_tokens, **kw)


def drive(run: Run, arrivals: Sequence[tuple[float, SimRequest]]) -> Run:
    """Submit each request at its time, then run the engine dry."""
    engine = run.engine
    last = None
    for at, request in sorted(arrivals, key=lambda a: a[0]):
        if at != last:  # requests at the same instant all arrive before the engine moves
            run.events += engine.advance(at)
            last = at
        assert engine.submit(request, at) is None
    while (t := engine.next_event_time()) is not None:
        run.events += engine.advance(t)
    return run
