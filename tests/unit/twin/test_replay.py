"""How a measured point is read into a workload: EOS-stopped outputs, the chat endpoint and the
defaults of the release and benchmark that measured it."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_operator.sim.catalog import load_catalog
from vllm_twin.calibration.measurements import Point, parse_measurements
from vllm_twin.calibration.replay import (
    engine_config,
    eos_lengths,
    release_defaults,
    workload_spec,
)

from .measurement_source import one_point


@settings(derandomize=True, max_examples=40, deadline=None)
@given(cap=st.integers(2, 4000), share=st.floats(0.05, 0.99))
def test_eos_lengths_average_the_measured_mean_under_the_cap(cap: int, share: float) -> None:
    mean = max(1.0, share * cap)
    dist = eos_lengths(cap, mean)
    assert dist.kind == "exponential" and dist.cap == cap
    # E[min(cap, Exp(mu))] = mu * (1 - exp(-cap / mu))
    assert dist.mean * -math.expm1(-cap / dist.mean) == pytest.approx(mean, rel=1e-9)


def test_eos_lengths_vary_so_a_closed_loop_leaves_lock_step() -> None:
    rng = random.Random(0)
    samples = [eos_lengths(128, 100.0).sample(rng) for _ in range(4000)]
    assert max(samples) == 128 and min(samples) < 20
    assert sum(samples) / len(samples) == pytest.approx(100.0, rel=0.03)


def _point(measured: dict[str, float], tool: str = "vllm bench serve") -> object:
    data = one_point(measured, workload={"output_len": 128, "ignore_eos": "unknown"})
    data["sources"][0]["tool"] = tool
    return parse_measurements(data).points[0]


def test_an_output_cap_stopped_early_reads_its_mean_from_the_throughputs() -> None:
    # 210 output tokens/s over 2.1 requests/s: 100 tokens per request, below the 128 cap
    spec = workload_spec(_point({"output_throughput_tps": 210.0, "request_throughput_rps": 2.1}))
    assert spec.output == eos_lengths(128, 100.0)
    reached = workload_spec(_point({"output_throughput_tps": 256.0, "request_throughput_rps": 2}))
    assert (reached.output.kind, reached.output.mean) == ("fixed", 128)


def test_a_chat_client_sends_chat_requests() -> None:
    measured = {"request_throughput_rps": 1.0}
    chat = "vllm bench serve (--backend openai-chat --endpoint /v1/chat/completions)"
    assert workload_spec(_point(measured, chat)).chat is True
    assert workload_spec(_point(measured)).chat is False


def _setup_point(setup: dict[str, object], workload: dict[str, object] | None = None) -> Point:
    data = one_point({"request_throughput_rps": 1.0}, setup=setup, workload=workload)
    return parse_measurements(data).points[0]


OFFLINE = {"mode": "offline-throughput", "num_prompts": 8}
A100 = {"gpu_type": "A100", "gpu_profile": "A100-80GB"}


@pytest.mark.parametrize(
    ("setup", "workload", "expected"),
    [
        # vLLM 0.33 itself, and a release of unknown date: the engine model's own defaults
        ({"vllm_version": "0.33.0"}, None, (0.92, None, None)),
        ({"vllm_version": "unknown"}, None, (0.92, None, None)),
        # 0.9 of GPU memory through 0.19.0, 0.92 from 0.20.0 (docs/vllm-0.33.md §6)
        ({"vllm_version": "0.11.0"}, None, (0.9, None, None)),
        ({"vllm_version": "0.10.1.1"}, None, (0.9, None, None)),
        ({"vllm_version": "0.19.0"}, None, (0.9, None, None)),
        ({"vllm_version": "0.20.0"}, None, (0.92, None, None)),
        # the source's own flag wins
        (
            {"vllm_version": "0.11.0", "server_args": "--gpu-memory-utilization 0.6"},
            None,
            (0.6, None, None),
        ),
        (
            {"vllm_version": "0.11.0", "server_args": "--gpu-memory-utilization=0.95"},
            None,
            (0.95, None, None),
        ),
        # the offline benchmarks' LLM class: 16384 / 1024 on an H100, 8192 / 256 on an A100
        ({"vllm_version": "0.33.0"}, OFFLINE, (0.92, 16384, 1024)),
        ({"vllm_version": "0.33.0", **A100}, OFFLINE, (0.92, 8192, 256)),
        (
            {"vllm_version": "0.33.0", "server_args": "--max-num-seqs 64"},
            OFFLINE,
            (0.92, 16384, 64),
        ),
        # a build that gave the A100 the 70 GiB tier (PR #17073, before PR #17885)
        (
            {"vllm_version": "unknown", "scheduler_budget": "medium", **A100},
            None,
            (0.92, 8192, 1024),
        ),
        (
            {"vllm_version": "unknown", "scheduler_budget": "small", **A100},
            None,
            (0.92, None, None),
        ),
    ],
)
def test_a_point_replays_with_the_defaults_of_the_release_and_benchmark_it_ran(
    setup: dict[str, object],
    workload: dict[str, object] | None,
    expected: tuple[float, int | None, int | None],
) -> None:
    point = _setup_point(setup, workload)
    gpu = load_catalog().gpu(str(point.setup.gpu_profile))
    cfg = release_defaults(point, engine_config(point), gpu)
    assert (cfg.gpu_memory_utilization, cfg.max_num_batched_tokens, cfg.max_num_seqs) == expected


def test_a_large_memory_gpu_had_the_70_gib_tier_before_0_28() -> None:
    large = {"gpu_type": "MI300X", "gpu_profile": "MI300X"}
    gpu = load_catalog().gpu("MI300X")
    old = _setup_point({"vllm_version": "0.27.1", **large})
    assert release_defaults(old, engine_config(old), gpu).max_num_batched_tokens == 8192
    new = _setup_point({"vllm_version": "0.28.0", **large})
    assert release_defaults(new, engine_config(new), gpu).max_num_batched_tokens is None


@settings(derandomize=True, max_examples=60, deadline=None)
@given(
    version=st.one_of(
        st.just("unknown"),
        st.builds("{}.{}.{}".format, st.just(0), st.integers(0, 40), st.integers(0, 5)),
    ),
    mode=st.sampled_from(["serve", "offline-throughput"]),
    seqs=st.one_of(st.none(), st.integers(1, 2048)),
    util=st.one_of(st.none(), st.sampled_from([0.5, 0.85, 0.95])),
)
def test_release_defaults_never_override_a_flag_the_source_set(
    version: str, mode: str, seqs: int | None, util: float | None
) -> None:
    args = " ".join(
        ([f"--max-num-seqs {seqs}"] if seqs else [])
        + ([f"--gpu-memory-utilization {util}"] if util else [])
    )
    workload = {"mode": mode, "num_prompts": 8}
    point = _setup_point({"vllm_version": version, "server_args": args}, workload)
    gpu = load_catalog().gpu("H100-80GB")
    cfg = release_defaults(point, engine_config(point), gpu)
    if seqs:
        assert cfg.max_num_seqs == seqs
    if util:
        assert cfg.gpu_memory_utilization == util
