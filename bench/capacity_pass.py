"""What the engine model's capacity costs the tuner: one cold evaluation, and one tuning loop over
1,000 services with a warm cache (operator CPU: the pure part of each pass, no I/O); and, with
`autotune: Auto`, what one look for a budget move costs (rule 9b, tuning/retune_pods.py).

    nice -n 10 python -m bench.capacity_pass [--services 1000] [--kinds 4] [--looks 40]

Each service is one of `--kinds` service kinds (GPU, model, budgets, SLO) with one of two traffic
mixes (prompt and output lengths with a few percent of noise per service, as real fleets of
one application show), and its own arrival rate. The loop is what handlers/tune.py runs per
service between the Prometheus answers and the status write: model_capacity() (cache key and
look-up), decide() and status_from_state(). Those services run `autotune: Off`: a pass there
never looks for a budget move. The last rows set the first `--looks` services to `Auto` (as
handlers/tune.py runs them: decide_seeing_spare_gpu, the free GPUs placing two pods) and time
their looks: each service's first, then its next with a new window's figures (arrivals x1.2 and
the length histograms drawn again), which is what a look every fewer_pods_recheck meets; a
service looks once per fewer_pods_recheck, so a pass over 1,000 of them makes a tenth of that
many looks. Then BUDGET_MINUTES one-minute loops over every service in Auto, each due for a look
with figures none has seen, within the operator's look budget (tuning/look_budget.py), as
handlers/tune.py runs them.
Writes bench/results/capacity_pass.json and .md. A
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
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.config import OperatorConfig
from vllm_operator.planning.lengths import Empirical
from vllm_operator.sim.catalog import load_catalog
from vllm_operator.tuning.decide import decide_seeing_spare_gpu
from vllm_operator.tuning.inputs import autotune_mode
from vllm_operator.tuning.look_budget import LookBudget, look_budget_of
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


SPARE_PODS = 2  # the surge pods the free GPUs place, for the Auto rows
BUDGET_MINUTES = 5  # one-minute loops timed within the look budget


def _spec(kind: tuple[Any, ...], replicas: int, mode: str = "Off") -> VLLMServiceSpec:
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
            "autotune": {"mode": mode},
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
        prompt_lengths=_lengths(_mix(k, kinds), rng),
        output_lengths=_lengths(OUTPUTS, rng),
    )  # fmt: skip
    return spec, snapshot


def _mix(k: int, kinds: int) -> tuple[int, ...]:
    return MIXES[(k // kinds) % len(MIXES)]


def _next_window(
    k: int, kinds: int, service: tuple[VLLMServiceSpec, MetricsSnapshot], rng: random.Random
) -> tuple[VLLMServiceSpec, MetricsSnapshot]:
    """The service's figures one look later: more arrivals, its histograms drawn again."""
    spec, snapshot = service
    assert snapshot.request_rate is not None
    return spec, replace(
        snapshot,
        request_rate=snapshot.request_rate * 1.2,
        prompt_lengths=_lengths(_mix(k, kinds), rng),
        output_lengths=_lengths(OUTPUTS, rng),
    )


def _loop(
    services: list[tuple[VLLMServiceSpec, MetricsSnapshot]],
    cache: CapacityCache,
    budget: LookBudget | None = None,
    now: datetime = NOW,
) -> tuple[float, float, int]:
    """One pass over every service at `now`: (CPU seconds, wall seconds, estimates found). With
    `budget`, each pass looks within it, as handlers/tune.py's do."""
    catalog, settings = load_catalog(), TuningSettings()
    state = TuningState(last_scale_at=now - timedelta(hours=1))
    cpu, wall, found = time.process_time(), time.perf_counter(), 0
    for spec, snapshot in services:
        estimate = model_capacity(spec, snapshot, state, settings, catalog=catalog, cache=cache)
        found += isinstance(estimate, ModelCapacity)
        args = (spec, snapshot, state, now, settings, capacity_estimates(estimate))
        if budget is None:
            decision = decide_seeing_spare_gpu(*args, lambda: SPARE_PODS)
        else:
            decision = budget.metered(
                now,
                lambda may_look, a=args: decide_seeing_spare_gpu(*a, lambda: SPARE_PODS, may_look),
            )
        status_from_state(decision.state, decision, None, now, mode=autotune_mode(spec))
    return time.process_time() - cpu, time.perf_counter() - wall, found


def _auto(
    services: list[tuple[VLLMServiceSpec, MetricsSnapshot]], kinds: int
) -> list[tuple[VLLMServiceSpec, MetricsSnapshot]]:
    return [(_spec(KINDS[k % kinds], spec.replicas, "Auto"), snapshot)
            for k, (spec, snapshot) in enumerate(services)]  # fmt: skip


def _looks(
    services: list[tuple[VLLMServiceSpec, MetricsSnapshot]], kinds: int, cache: CapacityCache
) -> tuple[float, float]:
    """CPU seconds per look of the services in Auto, without the look budget: their first
    look, then their next."""
    rng = random.Random(2)
    first = _auto(services, kinds)
    later = [_next_window(k, kinds, service, rng) for k, service in enumerate(first)]
    first_cpu, _, _ = _loop(first, cache)
    later_cpu, _, _ = _loop(later, cache)
    return first_cpu / len(first), later_cpu / len(later)


def _budgeted(
    services: list[tuple[VLLMServiceSpec, MetricsSnapshot]], kinds: int, cache: CapacityCache
) -> list[float]:
    """CPU seconds of one-minute loops over every service in Auto within the operator's look
    budget at its default, every service due for a look each minute with figures no look has
    seen (each minute's loop starts 1 / BUDGET_MINUTES of the fleet further on, so that its
    looks go to other services), the capacity cache warm for them (a loop whose budget is spent
    goes first): one figure per loop, BUDGET_MINUTES of them."""
    rng, budget, cpus = random.Random(3), look_budget_of(OperatorConfig()), []
    auto = _auto(services, kinds)
    for minute in range(BUDGET_MINUTES):
        now = NOW + timedelta(minutes=minute)
        due = [
            (spec, replace(snapshot, observed_at=now))
            for spec, snapshot in (_next_window(k, kinds, s, rng) for k, s in enumerate(auto))
        ]
        start = minute * len(due) // BUDGET_MINUTES
        due = due[start:] + due[:start]
        spent = LookBudget(1.0)
        spent.charge(2.0)
        _loop(due, cache, spent, now)  # the capacity keys of the new figures, as the warm rows
        cpu, _, _ = _loop(due, cache, budget, now)
        cpus.append(cpu)
    return cpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.capacity_pass")
    parser.add_argument("--services", type=int, default=1000)
    parser.add_argument("--kinds", type=int, default=len(KINDS), choices=range(1, len(KINDS) + 1))
    parser.add_argument("--looks", type=int, default=40, help="services timed in Auto (0: none)")
    args = parser.parse_args(argv)
    if args.services < 1:
        parser.error(f"--services must be at least 1, got {args.services}")
    if not 0 <= args.looks <= args.services:
        parser.error(
            f"--looks must be between 0 and --services ({args.services}), got {args.looks}"
        )
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
    timed = services[: args.looks]
    first_look, next_look = _looks(timed, args.kinds, cache) if timed else (0.0, 0.0)
    budgeted = _budgeted(services, args.kinds, cache) if timed else [0.0]
    # each service looks once per fewer_pods_recheck: a pass makes interval / recheck of them
    interval = OperatorConfig().tuning_interval_seconds
    share = interval / TuningSettings().fewer_pods_recheck.total_seconds()
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
        "looks": args.looks,
        "first_look_cpu_s": round(first_look, 3),
        "next_look_cpu_s": round(next_look, 3),
        "auto_pass_cpu_s": round(warm_cpu + args.services * share * next_look, 2),
        "looks_per_pass": round(args.services * share),
        "look_cpu_per_minute": OperatorConfig().tuning_look_cpu_per_minute,
        "recheck_minutes": TuningSettings().fewer_pods_recheck.total_seconds() / 60,
        "budgeted_pass_cpu_s": round(sum(budgeted) / len(budgeted), 2),
        "budgeted_pass_most_cpu_s": round(max(budgeted), 2),
        "budgeted_pass_each_cpu_s": [round(cpu, 2) for cpu in budgeted],
        "budgeted_minutes": BUDGET_MINUTES,
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
        + (_looks_rows(d) if d["looks"] else "")
    )


def _looks_rows(d: dict[str, Any]) -> str:
    return (
        f"| a service's first look for a budget move (autotune Auto, {d['looks']} services) | "
        f"{d['first_look_cpu_s']} s CPU per look |\n"
        f"| its next look, a new window's figures | {d['next_look_cpu_s']} s CPU per look |\n"
        f"| one tuning loop over {d['services']} services in Auto without a look budget "
        f"({d['looks_per_pass']} of them look in it, each once per fewer_pods_recheck) | "
        f"{d['auto_pass_cpu_s']} s CPU |\n"
        f"| **one tuning loop over {d['services']} services in Auto, every one due for a look, "
        f"within the operator's look budget** ({d['look_cpu_per_minute']:g} CPU-s a minute, "
        f"tuningLookCpuPerMinute; the mean of {d['budgeted_minutes']} one-minute loops, the "
        f"most in one; target < 5 s) | **{d['budgeted_pass_cpu_s']} s CPU** (most "
        f"{d['budgeted_pass_most_cpu_s']} s) |\n"
        f"| how often each of them is looked at, with the budget and looks of the next look's "
        f"cost | every {_look_period(d):.0f} minutes |\n"
    )


def _look_period(d: dict[str, Any]) -> float:
    """Minutes between two looks at one service: the recheck, or as long as the budget takes
    to look at every service."""
    per_minute = d["look_cpu_per_minute"] / max(d["next_look_cpu_s"], 1e-9)
    return float(max(d["recheck_minutes"], d["services"] / per_minute))


if __name__ == "__main__":
    raise SystemExit(main())
