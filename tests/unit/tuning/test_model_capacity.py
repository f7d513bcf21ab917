"""The engine model's per-pod capacity: its workload bucket, the search, the cache, the handover."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.tuning.support import T0, snap, spec, state
from vllm_operator.planning.candidate import Target
from vllm_operator.planning.lengths import Empirical, empirical_from_buckets
from vllm_operator.sim.catalog import load_catalog
from vllm_operator.tuning.model_capacity import (
    STEPS_PER_OCTAVE,
    CapacityCache,
    CapacityKey,
    LengthBucket,
    ModelCapacity,
    WorkloadBucket,
    budgets_in_force,
    capacity_estimates,
    compute_capacity,
    length_bucket,
    model_capacity,
)
from vllm_operator.tuning.observed_workload import Unmeasured
from vllm_operator.tuning.settings import TuningSettings

CATALOG = load_catalog()
EDGES = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0)
# small requests on an L4 with a 3B model: a probe is cheap
SMALL = WorkloadBucket(LengthBucket(128.0, 0.5, 1000), LengthBucket(32.0, 0.5, 200))


def small_key(ttft: float, **changes: object) -> CapacityKey:
    base = {
        "gpu": "L4", "gpus_per_pod": 1, "model": "Llama-3.2-3B",
        "budgets": (("max_num_seqs", 32),), "max_model_len": 4096,
        "target": Target(ttft, 0.1, 0.01, margin=0.0), "bucket": SMALL,
    }  # fmt: skip
    return CapacityKey(**{**base, **changes})  # type: ignore[arg-type]


counts = st.lists(st.integers(0, 50), min_size=len(EDGES), max_size=len(EDGES)).filter(any)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(counts)
def test_a_bucket_mean_is_within_half_a_step_of_the_distribution_mean(
    per_bucket: list[int],
) -> None:
    cumulative = [sum(per_bucket[: k + 1]) for k in range(len(EDGES))]
    dist = empirical_from_buckets(
        [*zip(EDGES, cumulative, strict=True), (math.inf, cumulative[-1])]
    )
    bucket = length_bucket(dist)
    half_step = 2 ** (0.5 / STEPS_PER_OCTAVE)
    assert max(dist.mean, 1.0) / half_step * 0.999 <= bucket.mean <= dist.mean * half_step * 1.001
    assert bucket.sigma in {k * 0.25 for k in range(9)}
    assert bucket.cap in EDGES and cumulative[EDGES.index(bucket.cap)] == cumulative[-1]


@settings(derandomize=True, max_examples=40, deadline=None)
@given(counts, st.floats(0.9, 1.1))
def test_the_cache_key_does_not_move_with_the_traffic_volume(
    per_bucket: list[int], volume: float
) -> None:
    # the same mix at another rate (or over another window) is the same bucket
    cumulative = [sum(per_bucket[: k + 1]) for k in range(len(EDGES))]
    a = empirical_from_buckets([*zip(EDGES, cumulative, strict=True)])
    b = empirical_from_buckets(
        [(e, c * volume * 7) for e, c in zip(EDGES, cumulative, strict=True)]
    )
    assert length_bucket(a) == length_bucket(b)


def test_one_populated_bucket_is_a_narrow_spread_capped_at_its_edge() -> None:
    # uniform over (100, 200]: mean 150 (2^(29/4) = 152.2), CV 0.19 -> sigma 0.25
    narrow = Empirical((100.0, 200.0, 500.0), (0.0, 1.0, 1.0))
    assert length_bucket(narrow) == LengthBucket(152.2, 0.25, 200)


@settings(derandomize=True, max_examples=3, deadline=None)
@given(st.sampled_from([(0.15, 0.3), (0.3, 2.0), (0.15, 2.0)]))
def test_capacity_grows_with_a_looser_slo(ttfts: tuple[float, float]) -> None:
    tight, loose = (compute_capacity(small_key(t), CATALOG, horizon=30.0) for t in ttfts)
    assert 0 < tight <= loose


def test_a_slo_nothing_meets_is_no_capacity() -> None:
    assert compute_capacity(small_key(0.001), CATALOG, horizon=30.0) == 0.0


def test_the_cache_computes_once_per_key_and_drops_the_least_recent() -> None:
    cache, computed = CapacityCache(size=2), []

    def compute(key: CapacityKey) -> float:
        computed.append(key.target.ttft)
        return key.target.ttft * 10

    a, b, c = small_key(1.0), small_key(2.0), small_key(3.0)
    assert [cache.get(k, compute) for k in (a, b, a, c, a, b)] == [10, 20, 10, 30, 10, 20]
    assert computed == [1.0, 2.0, 3.0, 2.0]  # b was the least recent when c came
    assert (len(cache), cache.misses) == (2, 4)


def test_budgets_in_force_are_the_overrides_over_the_spec_by_vllm_dest() -> None:
    assert budgets_in_force(spec(), {"maxSeqs": 24}) == (
        ("max_num_active_seqs", 8),
        ("max_num_batched_tokens", 4096),
        ("max_num_queued_reqs", 32),
        ("max_num_seqs", 24),
    )


LENGTHS = {
    "prompt_lengths": Empirical((100.0, 200.0), (0.0, 1.0)),
    "output_lengths": Empirical((10.0, 20.0), (0.0, 1.0)),
}
L4_SPEC = {"model": "meta-llama/Llama-3.2-3B-Instruct", "gpu": {"type": "L4"},
           "engine": {"maxModelLen": 4096}}  # fmt: skip


def test_model_capacity_reads_the_pass_and_caches_by_bucket() -> None:
    cache = CacheSpy()
    found = model_capacity(
        spec(**L4_SPEC), snap(**LENGTHS), state(overrides={"maxSeqs": 12}), TuningSettings(),
        catalog=CATALOG, cache=cache,
    )  # fmt: skip
    assert isinstance(found, ModelCapacity) and found.per_pod == 12.5 and found.at == T0
    key = found.key
    assert (key.gpu, key.model, key.max_model_len) == (
        "L4",
        "meta-llama/Llama-3.2-3B-Instruct",
        4096,
    )
    assert ("max_num_seqs", 12) in key.budgets and key.target == Target(0.5, 0.05, 0.01, 0.0)
    (estimate,) = capacity_estimates(found)
    assert (estimate.per_pod, estimate.source, estimate.at) == (12.5, "model", T0)
    assert estimate.basis == key.bucket.describe()


class CacheSpy(CapacityCache):
    """A cache already holding 12.5 req/s for every key: the search itself is tested above."""

    def get(self, key: CapacityKey, compute: object) -> float:
        return 12.5


@pytest.mark.parametrize(
    ("patch", "changes", "reason"),
    [
        ({"slo": {"ttftP95": None}}, {}, "spec.slo.ttftP95 is not set"),
        ({}, {"prompt_lengths": None}, "no vllm:request_prompt_tokens histogram in the window"),
        ({"model": "org/unknown"}, {}, "no engine profile: unknown model 'org/unknown'"),
    ],
)
def test_what_stops_a_model_capacity_is_named(
    patch: dict[str, object], changes: dict[str, object], reason: str
) -> None:
    found = model_capacity(
        spec(**{**L4_SPEC, **patch}), snap(**{**LENGTHS, **changes}), state(), TuningSettings(),
        catalog=CATALOG, cache=CapacityCache(),
    )  # fmt: skip
    assert isinstance(found, Unmeasured) and found.reason.startswith(reason)
    assert capacity_estimates(found) == ()


def test_an_estimate_is_dated_by_its_snapshot() -> None:
    later = snap(**LENGTHS, observed_at=T0 + timedelta(minutes=1))
    found = model_capacity(
        spec(**L4_SPEC), later, state(), TuningSettings(), catalog=CATALOG, cache=CacheSpy()
    )
    assert isinstance(found, ModelCapacity) and found.at == T0 + timedelta(minutes=1)


def test_bursts_lower_what_a_pod_serves_and_are_part_of_the_key() -> None:
    """The same requests in bursts of 4 over 5 s queue where Poisson arrivals do not: a pod
    serves less within the same TTFT p95. The burst is in the bucket, so the cache keeps both."""
    bursty = WorkloadBucket(SMALL.prompt, SMALL.output, burst=4.0)
    plain, burst = (
        compute_capacity(small_key(2.0), CATALOG),
        compute_capacity(small_key(2.0, bucket=bursty), CATALOG),
    )
    assert 0 < burst < plain
    assert small_key(2.0) != small_key(2.0, bucket=bursty)
    assert bursty.describe().endswith(", in bursts of 4")
    assert "burst" not in SMALL.describe()
