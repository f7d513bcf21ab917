"""The cohort fast path (token_events=False) against the reference path, on random scenarios.

The reference path walks every request every step, exactly as docs/vllm-0.33-scheduler.md's
pseudocode does; the fast path advances steady decodes in aggregate. Both must give the same
records, bit for bit, and the same counters, whatever the flags. The scenarios mix KV pressure
(preemptions), priorities, thresholds, chunking off, prefix sharing, n>1, aborts and both
scheduling modes.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from vllm_operator.sim.engine import (
    Engine,
    EngineConfig,
    InvalidRequestError,
    RequestRecord,
    SimRequest,
)
from vllm_operator.sim.engine.stats import EngineStats

from .helpers import H100, LLAMA8


def _scenario(seed: int) -> tuple[EngineConfig, list[SimRequest], dict[str, float]]:
    rng = random.Random(seed)
    chunked = rng.random() < 0.8
    seqs = rng.choice([4, 8, 32, 256])
    cfg = EngineConfig(
        max_num_seqs=seqs,
        max_num_active_seqs=max(1, seqs // 2) if rng.random() < 0.3 else None,
        max_num_batched_tokens=rng.choice([256, 512, 2048]) if chunked else 2048,
        max_num_queued_reqs=rng.choice([None, None, 30]),
        max_num_queued_tokens=rng.choice([None, None, 8000]),
        max_model_len=2048,
        enable_chunked_prefill=chunked,
        enable_prefix_caching=rng.random() < 0.6,
        scheduling_policy=rng.choice(["fcfs", "priority"]),
        long_prefill_token_threshold=rng.choice([0, 0, 64, 200]),
        async_scheduling=seed % 3 != 0,  # a third of the scenarios in sync mode
        watermark=rng.choice([0.0, 0.0, 0.05]),
        scheduler_reserve_full_isl=rng.random() < 0.7,
        num_gpu_blocks_override=rng.choice([200, 400, 1000]),
    )
    reqs = []
    t = 0.0
    for i in range(rng.choice([25, 50])):
        t += rng.expovariate(rng.choice([5, 20, 80]))
        reqs.append(
            SimRequest(
                f"r{i}",
                t,
                rng.randint(1, 1500),
                rng.randint(1, 200),
                priority=rng.randint(0, 3),
                n=rng.choice([1, 1, 1, 2, 3]),
                prefix_id=rng.choice([None, "a", "b"]),
                prefix_tokens=rng.choice([0, 100, 500]),
            )
        )
    aborts = {rng.choice(reqs).request_id: rng.uniform(0, t + 3) for _ in range(rng.randint(0, 4))}
    return cfg, reqs, aborts


def _play(
    cfg: EngineConfig, reqs: list[SimRequest], aborts: dict[str, float], token_events: bool
) -> tuple[list[RequestRecord], list[object], EngineStats]:
    engine = Engine(cfg, H100, LLAMA8, seed=1, token_events=token_events)
    events = []
    outcomes: list[object] = []
    actions = [(r.arrival, 0, r) for r in reqs] + [(at, 1, rid) for rid, at in aborts.items()]
    for at, _kind, item in sorted(actions, key=lambda a: (a[0], a[1])):
        events += engine.advance(at)
        if isinstance(item, SimRequest):
            try:
                outcomes.append(engine.submit(item, at))
            except InvalidRequestError:
                outcomes.append("invalid")
        else:
            engine.abort(item, at)
    while (t := engine.next_event_time()) is not None:
        events += engine.advance(t)
    records = sorted(
        (e.record for e in events if e.record is not None), key=lambda r: (r.request_id, r.index)
    )
    stats = dataclasses.replace(engine.stats(), iteration_tokens=())
    return records, outcomes, stats


@pytest.mark.parametrize("seed", range(16))
def test_fast_path_matches_reference_path(seed: int) -> None:
    cfg, reqs, aborts = _scenario(seed)
    reference = _play(cfg, reqs, aborts, token_events=True)
    fast = _play(cfg, reqs, aborts, token_events=False)
    assert fast[1] == reference[1]
    assert fast[2] == reference[2]
    assert fast[0] == reference[0]
    assert reference[0], "the scenario must complete some requests"


def test_fast_path_really_takes_steps_in_aggregate() -> None:
    # a steady decode batch: the cohort carries it, the reference lists every request
    cfg = EngineConfig(max_model_len=4096)
    reqs = [SimRequest(f"r{i}", 0.0, 500, 300) for i in range(8)]
    steps: list[tuple[int, int]] = []
    engine = Engine(cfg, H100, LLAMA8, token_events=False)
    engine.set_batch_hook(lambda _now, batch: steps.append((len(batch.entries), batch.cohort_n)))
    for r in reqs:
        engine.submit(r, 0.0)
    engine.advance(100.0)
    assert steps[0] == (8, 0)  # prefills are explicit
    assert steps[-1] == (0, 8)  # then the cohort decodes
    assert sum(1 for _, members in steps if members == 8) > 250
