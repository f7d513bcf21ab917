"""What the engine model's capacity costs the tuner: one cold evaluation, and one tuning loop over
1,000 services with a warm cache (operator CPU: the pure part of each pass, no I/O).

    nice -n 10 python -m bench.capacity_pass [--services 1000] [--kinds 4]

Each service is one of `--kinds` service kinds (GPU, model, budgets, SLO) with one of two traffic
mixes (prompt and output lengths with a few percent of noise per service, as real fleets of
one application show), and its own arrival rate. The loop is what handlers/tune.py runs per
service between the Prometheus answers and the status write: model_capacity() (cache key and
look-up), decide() and status_from_state(). Writes bench/results/capacity_pass.json and .md. A
figure, not a test: CPU time depends on the machine and on what else runs on it (the load average
at the start is recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.planning.lengths import Empirical
from vllm_operator.sim.catalog import load_catalog
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.model import FleetView, MetricsSnapshot, TuningState
from vllm_operator.tuning.model_capacity import (
    CapacityCache,
    ModelCapacity,
    capacity_estimates,
    compute_capacity,
    model_capacity,
)
from vllm_operator.tuning.persist import status_from_state
from vllm_operator.tuning.settings import TuningSettings

RESULTS = Path(__file__).resolve().parent / "results"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
EDGES = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1e3, 2e3, 5e3, 1e4)
# (GPU, model, budgets, TTFT, ITL): the control-loop benchmark's two profiles, two budget sets
KINDS = (
    ("H100-80GB", "meta-llama/Llama-3.1-8B-Instruct", 64, 128, 8192, "500ms", "30ms"),
    ("L4", "meta-llama/Llama-3.2-3B-Instruct", 32, 64, 2048, "2000ms", "100ms"),
    ("H100-80GB", "meta-llama/Llama-3.1-8B-Instruct", 128, 256, 8192, "500ms", "30ms"),
    ("L4", "meta-llama/Llama-3.2-3B-Instruct", 16, 32, 2048, "2000ms", "100ms"),
)
# bucket shares of two mixes: chat-like and long-prompt
MIXES = (
    (0, 0, 0, 0, 1, 4, 10, 20, 30, 20, 10, 4, 1),
    (0, 0, 0, 0, 0, 1, 2, 5, 15, 30, 30, 15, 2),
)
OUTPUTS = (0, 1, 2, 5, 15, 30, 30, 12, 4, 1, 0, 0, 0)


def _spec(kind: tuple[Any, ...], replicas: int) -> VLLMServiceSpec:
    gpu, model, seqs, requests, batched, ttft, itl = kind
    return VLLMServiceSpec.model_validate(
        {
            "model": model,
            "replicas": replicas,
            "gpu": {"type": gpu},
            "engine": {"maxModelLen": 16384},
            "budgets": {
                "queue": {"maxRequests": requests},
                "running": {"maxSeqs": seqs},
                "tokens": {"maxBatchedTokens": batched},
            },
            "slo": {"ttftP95": ttft, "itlP95": itl, "maxRejectionRatio": 0.005},
            "autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 8},
            "autotune": {"mode": "Off"},
        }
    )


def _lengths(shares: tuple[int, ...], rng: random.Random) -> Empirical:
    noisy = [s * rng.uniform(0.97, 1.03) for s in shares]
    total, cumulative = sum(noisy), []
    for share in noisy:
        cumulative.append((cumulative[-1] if cumulative else 0.0) + share / total)
    return Empirical(EDGES, tuple(cumulative))


def _service(k: int, kinds: int, rng: random.Random) -> tuple[VLLMServiceSpec, MetricsSnapshot]:
    replicas = rng.randint(1, 6)
    spec = _spec(KINDS[k % kinds], replicas)
    snapshot = MetricsSnapshot(
        observed_at=NOW, window_seconds=300.0, quality="ok", pods_expected=replicas,
        pods_scraped=replicas, request_rate=rng.uniform(0.5, 4.0) * replicas,
        rejection_rate=0.0, rejection_ratio=0.0, ttft_p95=0.2, itl_p95=0.01,
        queue_time_p95=0.01, e2e_p95=2.0, waiting=0.0, running=2.0 * replicas, kv_usage=0.2,
        preemption_rate=0.0, prompt_tokens_per_request=900.0,
        fleet=FleetView(desired=replicas, ready=replicas, updated=replicas, rolling=False),
        prompt_lengths=_lengths(MIXES[(k // kinds) % len(MIXES)], rng),
        output_lengths=_lengths(OUTPUTS, rng),
    )  # fmt: skip
    return spec, snapshot


def _loop(
    services: list[tuple[VLLMServiceSpec, MetricsSnapshot]], cache: CapacityCache
) -> tuple[float, float, int]:
    """One pass over every service: (CPU seconds, wall seconds, estimates found)."""
    catalog, settings = load_catalog(), TuningSettings()
    state = TuningState(last_scale_at=NOW - timedelta(hours=1))
    cpu, wall, found = time.process_time(), time.perf_counter(), 0
    for spec, snapshot in services:
        estimate = model_capacity(spec, snapshot, state, settings, catalog=catalog, cache=cache)
        found += isinstance(estimate, ModelCapacity)
        decision = decide(spec, snapshot, state, NOW, settings, capacity_estimates(estimate))
        status_from_state(decision.state, decision, None, NOW, mode="Off")
    return time.process_time() - cpu, time.perf_counter() - wall, found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.capacity_pass")
    parser.add_argument("--services", type=int, default=1000)
    parser.add_argument("--kinds", type=int, default=len(KINDS), choices=range(1, len(KINDS) + 1))
    args = parser.parse_args(argv)
    rng = random.Random(1)
    services = [_service(k, args.kinds, rng) for k in range(args.services)]
    load = os.getloadavg()[0]
    cache, catalog = CapacityCache(), load_catalog()

    # cold: the first service's key, computed from nothing
    first = model_capacity(*services[0][:2], TuningState(), TuningSettings(), catalog=catalog,
                           cache=CapacityCache(size=1))  # fmt: skip
    assert isinstance(first, ModelCapacity)
    cpu = time.process_time()
    compute_capacity(first.key, catalog)
    cold = time.process_time() - cpu

    fill_cpu, fill_wall, _ = _loop(services, cache)  # every distinct key computed once
    warm_cpu, warm_wall, found = _loop(services, cache)
    doc = {
        "command": " ".join(["python -m bench.capacity_pass", *(argv or sys.argv[1:])]),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {load:.2f} at start",
        "python": platform.python_version(),
        "services": args.services,
        "keys": len(cache),
        "estimates": found,
        "cold_evaluation_cpu_s": round(cold, 2),
        "cold_pass_cpu_s": round(fill_cpu, 2),
        "cold_pass_wall_s": round(fill_wall, 2),
        "warm_pass_cpu_s": round(warm_cpu, 3),
        "warm_pass_wall_s": round(warm_wall, 3),
        "first_capacity_per_pod": first.per_pod,
        "first_bucket": first.key.bucket.describe(),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "capacity_pass.json").write_text(json.dumps(doc, indent=1) + "\n")
    (RESULTS / "capacity_pass.md").write_text(_markdown(doc))
    print(_markdown(doc))
    return 0


def _markdown(d: dict[str, Any]) -> str:
    return (
        "# Model capacity: cost of a tuning loop\n\n"
        f"`{d['command']}`: {d['date']}, {d['machine']}, Python {d['python']}. "
        "Operator CPU is process time of the pure part of each pass (model_capacity, decide, "
        "status_from_state); Prometheus and API-server I/O are not in it "
        "(bench/operator_scale.py measures those).\n\n"
        "| figure | value |\n|---|---|\n"
        f"| one cold evaluation (H100-80GB, Llama-3.1-8B, {d['first_bucket']}) | "
        f"{d['cold_evaluation_cpu_s']} s CPU, {d['first_capacity_per_pod']:.2f} req/s per pod |\n"
        f"| first loop over {d['services']} services (fills the cache: {d['keys']} keys) | "
        f"{d['cold_pass_cpu_s']} s CPU, {d['cold_pass_wall_s']} s wall |\n"
        f"| **one tuning loop over {d['services']} services, warm cache** (target < 5 s) | "
        f"**{d['warm_pass_cpu_s']} s CPU**, {d['warm_pass_wall_s']} s wall |\n"
        f"| services with a model estimate | {d['estimates']} of {d['services']} |\n"
    )


if __name__ == "__main__":
    raise SystemExit(main())
