"""How fast the virtual-time simulator runs: an hour of the Azure conv trace on 8 replicas.

    .venv/bin/python bench/sim_speed.py [--multipliers 1,4] [--duration 3600] [--replicas 8]

Writes bench/results/sim_speed.json, .md and .png. A figure, not a test: nothing here passes or
fails on time. Wall time depends on the machine and on what else runs on it (the load average
at the start is recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vllm_operator.sim.catalog import load_catalog
from vllm_operator.sim.engine import EngineConfig
from vllm_operator.sim.fleet import Fleet
from vllm_operator.sim.report import Slo
from vllm_operator.sim.runner import run
from vllm_operator.sim.workload import azure_trace

RESULTS = Path(__file__).resolve().parent / "results"
GPU, MODEL = "H100-80GB", "Llama-3.1-8B"
SLO = Slo(ttft=0.5, itl=0.06)


def one_run(multiplier: float, duration: float, replicas: int) -> dict[str, Any]:
    catalog = load_catalog()
    started = time.perf_counter()
    # loop=True: at a multiplier above 1 the 58-minute trace repeats to fill the hour
    workload = azure_trace("conv", rate_multiplier=multiplier, duration=duration, loop=True)
    loaded = time.perf_counter()
    fleet = Fleet(
        EngineConfig(),
        catalog.gpu(GPU),
        catalog.model(MODEL),
        replicas,
        balancer="least_outstanding",
    )
    result = run(workload, fleet, duration, slo=SLO)
    finished = time.perf_counter()
    f = result.figures
    wall = finished - started
    return {
        "trace": "conv",
        "rate_multiplier": multiplier,
        "virtual_seconds": duration,
        "replicas": replicas,
        "requests": len(workload),
        "engine_steps": result.steps,
        "wall_seconds": round(wall, 2),
        "wall_seconds_trace_load": round(loaded - started, 2),
        "virtual_per_wall": round(duration / wall, 1),
        "steps_per_wall_second": round(result.steps / wall),
        "figures": {
            "completed": f.completed,
            "rejected": f.rejected,
            "ttft_ms": [round(v * 1e3, 1) for v in (f.ttft.p50, f.ttft.p95, f.ttft.p99)],
            "itl_ms": [round(v * 1e3, 2) for v in (f.itl.p50, f.itl.p95, f.itl.p99)],
            "e2e_ms": [round(v * 1e3, 1) for v in (f.e2e.p50, f.e2e.p95, f.e2e.p99)],
            "throughput_rps": round(f.throughput_rps, 2),
            "output_tps": round(f.output_tps),
            "goodput_share": round(f.goodput_share or 0.0, 4),
            "kv_usage_mean": round(f.kv_usage_mean, 4),
            "kv_usage_max": round(f.kv_usage_max, 4),
            "preemptions": f.preemptions,
        },
    }


def to_markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Simulator speed",
        "",
        f"{report['gpu']} + {report['model']}, default vLLM flags, least-outstanding balancer, "
        f"Azure LLM 2023 conv trace. Measured {report['date']} on {report['machine']} "
        f"(Python {report['python']}, load average {report['load_average']} at start).",
        "",
        "| rate x | virtual s | replicas | requests | engine steps | wall s | virtual/wall "
        "| TTFT p50/p99 ms | ITL p50/p99 ms | 503s | KV mean/max |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["runs"]:
        f = r["figures"]
        lines.append(
            f"| {r['rate_multiplier']} | {r['virtual_seconds']:.0f} | {r['replicas']} "
            f"| {r['requests']} | {r['engine_steps']} | {r['wall_seconds']} "
            f"| {r['virtual_per_wall']} | {f['ttft_ms'][0]} / {f['ttft_ms'][2]} "
            f"| {f['itl_ms'][0]} / {f['itl_ms'][2]} | {f['rejected']} "
            f"| {f['kv_usage_mean']:.1%} / {f['kv_usage_max']:.1%} |"
        )
    lines += ["", "Wall time includes reading the trace and computing the figures.", ""]
    return "\n".join(lines)


def write_plot(report: dict[str, Any], path: Path) -> None:
    """Wall time and virtual seconds per wall second, per rate multiplier."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = report["runs"]
    labels = [f"x{r['rate_multiplier']:g}\n{r['requests']:,} req" for r in runs]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    left.bar(labels, [r["wall_seconds"] for r in runs], color="tab:blue")
    left.set_ylabel("wall seconds for one virtual hour")
    left.axhline(60, color="tab:red", linestyle="--", label="one minute")
    left.legend()
    right.bar(labels, [r["virtual_per_wall"] for r in runs], color="tab:green")
    right.set_ylabel("virtual seconds per wall second")
    fig.suptitle(f"Simulator speed: {report['replicas']} x {GPU} + {MODEL}, Azure conv trace")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--multipliers", default="1", help="comma-separated rate multipliers")
    p.add_argument("--duration", type=float, default=3600.0, help="virtual seconds")
    p.add_argument("--replicas", type=int, default=8)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    load = round(os.getloadavg()[0], 2)
    runs = []
    for text in args.multipliers.split(","):
        result = one_run(float(text), args.duration, args.replicas)
        print(json.dumps(result), file=sys.stderr)
        runs.append(result)
    report = {
        "gpu": GPU,
        "model": MODEL,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
        "load_average": load,
        "replicas": args.replicas,
        "runs": runs,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sim_speed.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "sim_speed.md").write_text(to_markdown(report))
    write_plot(report, args.out / "sim_speed.png")
    print(to_markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
