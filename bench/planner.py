"""The planner on example workloads: its plan against vLLM's defaults on as many GPUs, and how
long planning takes.

    .venv/bin/python bench/planner.py [--only NAME]

Per workload: `plan()` as `vllm-operator plan` runs it (wall time measured around it), then
vLLM's defaults evaluated on the recommendation's GPU count over the same (whole) workload. Writes
bench/results/planner.json, .md and .png. A figure, not a test: wall time depends on the machine
and what else runs on it (the load average at the start is recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vllm_operator.planning.candidate import Candidate, Target
from vllm_operator.planning.evaluate import Point, Setting, evaluate
from vllm_operator.planning.lengths import parse_lengths
from vllm_operator.planning.output import point_json
from vllm_operator.planning.planner import plan
from vllm_operator.planning.workload import Workload, build_arrivals
from vllm_operator.sim.catalog import load_catalog

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Example:
    name: str
    gpu: str
    model: str
    workload: Workload
    target: Target
    command: str


EXAMPLES = (
    Example(
        "h100-chat-conv",
        "H100-80GB",
        "Llama-3.1-8B",
        Workload("trace", "Azure conv trace, 1 h", trace="conv"),
        Target(0.8, 0.05),
        "--gpu H100-80GB --model meta-llama/Llama-3.1-8B-Instruct --trace conv "
        "--slo-ttft 800ms --slo-itl 50ms",
    ),
    Example(
        "h100-chat-conv-x4",
        "H100-80GB",
        "Llama-3.1-8B",
        Workload("trace", "Azure conv trace x4, 1 h", trace="conv", rate_multiplier=4.0),
        Target(0.8, 0.05),
        "--gpu H100-80GB --model meta-llama/Llama-3.1-8B-Instruct --trace conv "
        "--rate-multiplier 4 --slo-ttft 800ms --slo-itl 50ms",
    ),
    Example(
        "h100-code",
        "H100-80GB",
        "Qwen2.5-7B",
        Workload("trace", "Azure code trace, 1 h", trace="code"),
        Target(1.0, 0.04),
        "--gpu H100-80GB --model Qwen/Qwen2.5-7B-Instruct --trace code "
        "--slo-ttft 1s --slo-itl 40ms",
    ),
    Example(
        "t4-small-poisson",
        "T4",
        "Qwen2.5-0.5B",
        Workload(
            "poisson",
            "Poisson 20 req/s",
            rate=20.0,
            prompt=parse_lengths("exp:512"),
            output=parse_lengths("exp:128"),
        ),
        Target(1.0, 0.06),
        "--gpu T4 --model Qwen/Qwen2.5-0.5B-Instruct --poisson 20 --prompt-len exp:512 "
        "--output-len exp:128 --slo-ttft 1s --slo-itl 60ms",
    ),
)


def _defaults_on(point: Point, example: Example, setting: Setting) -> Point:
    c = point.candidate
    base = Candidate(c.gpu, c.replicas, tp=c.tp, max_model_len=c.max_model_len)
    arrivals = None if example.workload.kind == "closed" else build_arrivals(example.workload)
    return evaluate(replace(base), example.workload, arrivals, setting, "vLLM defaults")


def one(example: Example) -> dict[str, Any]:
    setting = Setting(load_catalog(), example.model, example.target, {})
    started = time.perf_counter()
    result = plan(example.workload, [example.gpu], setting, max_replicas=16)
    wall = time.perf_counter() - started
    rec = result.chosen.recommendation
    defaults = _defaults_on(rec, example, setting)
    return {
        "name": example.name,
        "command": f"vllm-operator plan {example.command}",
        "workload": example.workload.label,
        "plan_wall_seconds": round(wall, 1),
        "evaluations": len(result.points),
        "plan": point_json(rec),
        "defaults_same_gpus": point_json(defaults),
        "never_worse": (
            rec.meets_slo >= defaults.meets_slo and rec.slo_attainment >= defaults.slo_attainment
        ),
    }


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1000:.0f}"


def write_md(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# Planner",
        "",
        f"`vllm-operator plan` per example workload against vLLM's defaults on as many GPUs, both "
        f"evaluated on the whole workload in the engine model. Measured {meta['date']} on "
        f"{meta['machine']}, {meta['cpus']} CPUs (Python {meta['python']}, load average "
        f"{meta['load']:.2f} at start). Plan wall time includes reading the trace.",
        "",
        "| workload | GPUs | plan flags | plan TTFT p95 / ITL p95 ms | plan 503 | plan within SLO "
        "| defaults TTFT p95 / ITL p95 ms | defaults 503 | defaults within SLO | never worse "
        "| evaluations | plan wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        p, d = r["plan"], r["defaults_same_gpus"]
        flags = {k: v for k, v in p["flags"].items() if d["flags"].get(k) != v}
        lines.append(
            f"| {r['name']} ({r['workload']}) | {p['replicas']} x {p['gpu']} | "
            f"{', '.join(f'{k}={v}' for k, v in flags.items()) or 'defaults'} | "
            f"{_ms(p['ttft_p95_s'])} / {_ms(p['itl_p95_s'])} | {p['rejected_share']:.1%} | "
            f"{p['slo_attainment']:.1%} | {_ms(d['ttft_p95_s'])} / {_ms(d['itl_p95_s'])} | "
            f"{d['rejected_share']:.1%} | {d['slo_attainment']:.1%} | "
            f"{'yes' if r['never_worse'] else 'NO'} | {r['evaluations']} | "
            f"{r['plan_wall_seconds']} |"
        )
    lines += ["", "Commands:", ""]
    lines += [f"- {r['name']}: `{r['command']}`" for r in rows]
    return "\n".join(lines) + "\n"


def write_png(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    names = [r["name"] for r in rows]
    xs = range(len(rows))
    left.bar([x - 0.2 for x in xs], [r["plan"]["slo_attainment"] for r in rows], 0.4,
             label="plan")  # fmt: skip
    left.bar([x + 0.2 for x in xs], [r["defaults_same_gpus"]["slo_attainment"] for r in rows],
             0.4, label="vLLM defaults, same GPUs")  # fmt: skip
    left.set_xticks(list(xs), names, rotation=20, fontsize=8)
    left.set_ylabel("requests within the SLO")
    left.legend(fontsize=8)
    right.bar(list(xs), [r["plan_wall_seconds"] for r in rows], color="tab:grey")
    right.axhline(60, color="red", linestyle="--", label="target: 60 s")
    right.set_xticks(list(xs), names, rotation=20, fontsize=8)
    right.set_ylabel("plan wall time (s)")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="one example by name")
    args = parser.parse_args(argv)
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load": os.getloadavg()[0],
    }
    rows = []
    for example in EXAMPLES:
        if args.only and example.name != args.only:
            continue
        print(f"planner bench: {example.name} ...", file=sys.stderr)
        rows.append(one(example))
        print(f"  {rows[-1]['plan_wall_seconds']} s", file=sys.stderr)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "planner.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    (RESULTS / "planner.md").write_text(write_md(rows, meta))
    write_png(rows, RESULTS / "planner.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
