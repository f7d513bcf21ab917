"""Prefix caching where requests share content (docs/vllm-0.33-scheduler.md §2.3, §2.4)."""

from __future__ import annotations

from .helpers import drive, req, tiny_engine

CACHING = {"enable_prefix_caching": True, "max_num_seqs": 4, "max_num_batched_tokens": 512}


def test_n_siblings_share_blocks_registered_in_the_same_step() -> None:
    run = drive(tiny_engine(**CACHING), [(0.0, req("A", 100, 3, n=2))])
    # the second child hits the 6 full blocks the first registers at allocation: 100 and 4
    assert run.step_tokens()[0] == {"A": 100, "A:1": 4}
    records = run.records()
    assert (records["A"].cached_tokens, records["A:1"].cached_tokens) == (0, 96)
    assert records["A:1"].output_tokens == 3


def test_shared_prefix_hits_are_block_aligned_and_leave_the_last_block() -> None:
    run = drive(
        tiny_engine(**CACHING),
        [
            (0.0, req("A", 48, 1, prefix_id="sys", prefix_tokens=48)),
            (1.0, req("B", 48, 1, prefix_id="sys", prefix_tokens=48)),  # a 48-token repeat
            (2.0, req("C", 60, 1, prefix_id="sys", prefix_tokens=48)),  # shares 48 tokens
            (3.0, req("D", 60, 1)),  # shares nothing
        ],
    )
    # the hit is capped at num_tokens-1 rounded down to a block: 32 of 48, then 48 of 60
    assert run.step_tokens() == [{"A": 48}, {"B": 16}, {"C": 12}, {"D": 60}]
    stats = run.engine.stats()
    assert (stats.prefix_cache_queries, stats.prefix_cache_hits) == (48 + 48 + 60 + 60, 32 + 48)


def test_preempted_request_hits_its_own_blocks_until_they_are_evicted() -> None:
    tight = {**CACHING, "num_gpu_blocks_override": 12, "max_num_batched_tokens": 256}
    run = drive(
        tiny_engine(**tight),
        [(0.0, req("r1", 48, 60)), (0.0, req("r2", 48, 60)), (0.0, req("r3", 48, 60))],
    )
    # the FCFS example again (test_sim_preemption): r2 was preempted with 5 full blocks, freed
    # tail first; r1 later took one block, evicting r2's tail. On resume r2 hits 4 blocks and
    # recomputes 81-64 = 17 tokens; r3's blocks were all evicted, it recomputes 49.
    assert run.step_tokens()[60] == {"r2": 17, "r3": 49}
    # re-admissions after preemption stay out of the prefix-cache counters (§2.4)
    assert run.engine.stats().prefix_cache_hits == 0
