"""Two operator trees on one cluster session: operator arms only, alternating A B B A ...

bench/operator_scale.py measures one tree against the raw control plane; comparing two trees
with it takes one invocation per tree, and on a shared host the later or busier session looks
worse (docs/operator-scale.md, issue 17's pod watch). Here each pair runs both trees back to
back under the same conditions, the order flipped every pair so that a drift over the session
falls on both, and every arm records what the API server served (its request and watch-event
counters, bench/scale_probes.py): counts, which the host's load does not move, beside the
timings, which it does. "this" is the operator on PYTHONPATH (this checkout); "other" is
`--other DIR`'s `operator/`, e.g. an export of main (`git archive main | tar -x -C DIR`).
Figures go to bench/results/<stem>.{json,md}.

Run: python bench/operator_ab.py --other /tmp/main --services 300 --pairs 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.operator_scale import OUT, bench_fleet, connect, run_arm
from bench.scale_report import LAGS, percentile, spread

TREES = ("this", "other")
# (key in a run's record, label): per tree, median (min-max) over its runs
FIGURES: tuple[tuple[str, str], ...] = (
    ("all_ready_s", "time to all Ready (s)"),
    ("apiserver_cpu_s", "kube-apiserver CPU (CPU-s)"),
    ("etcd_cpu_s", "etcd CPU (CPU-s)"),
    ("client_cpu_s", "operator CPU (CPU-s)"),
    ("writes", "API writes in the namespace"),
)


def arm_order(pairs: int) -> list[str]:
    """this, other, other, this, ...: each tree first in half of the pairs."""
    return [t for k in range(pairs) for t in (TREES if k % 2 == 0 else TREES[::-1])]


def summarize_ab(runs: list[dict[str, Any]], min_gap: float = 0.05) -> dict[str, Any]:
    """Per tree: the figures' spread, the lag percentiles over all its services, and the
    counts the API server served whose medians differ between the trees by more than
    `min_gap` of the larger (and by more than 2 requests)."""
    out: dict[str, Any] = {"figures": {}, "lags": {}, "served": {}}
    by_tree = {t: [r for r in runs if r["tree"] == t] for t in TREES}
    for key, _ in FIGURES:
        out["figures"][key] = {
            t: spread(vals) if (vals := [r[key] for r in rs if r.get(key) is not None]) else None
            for t, rs in by_tree.items()
        }
    for key, _ in LAGS:
        out["lags"][key] = {
            t: {"p50": round(percentile(v, 0.5), 3), "p99": round(percentile(v, 0.99), 3)}
            if (v := [x for r in rs for x in r.get(key, [])])
            else None
            for t, rs in by_tree.items()
        }
    keys = sorted({k for r in runs for k in r.get("served", {})})
    for k in keys:
        medians = {
            t: statistics.median(r.get("served", {}).get(k, 0) for r in rs) if rs else 0
            for t, rs in by_tree.items()
        }
        gap = abs(medians["this"] - medians["other"])
        if gap > 2 and gap > min_gap * max(medians.values()):
            out["served"][k] = medians
    return out


def _cell(stat: dict[str, float] | None) -> str:
    return "n/a" if stat is None else f"{stat['median']:.1f} ({stat['min']:.1f}-{stat['max']:.1f})"


def render_ab(meta: dict[str, Any], summary: dict[str, Any]) -> str:
    lines = [
        f"# Operator A/B: {meta['services']} VLLMServices, two trees in one session",
        "",
        f"`{meta['command']}` ({meta['date']}; arms in the order {', '.join(meta['order'])};"
        f" other = {meta['other']}). Median (min-max) over each tree's runs.",
        "",
        "| figure | this tree | other tree |",
        "|---|---|---|",
    ]
    for key, label in FIGURES:
        row = summary["figures"][key]
        lines.append(f"| {label} | {_cell(row['this'])} | {_cell(row['other'])} |")
    for key, label in LAGS:
        row = summary["lags"][key]
        cells = [f"p50 {x['p50']:.2f}, p99 {x['p99']:.2f}" if x else "n/a" for x in row.values()]
        lines.append(f"| {label} (s) | {cells[0]} | {cells[1]} |")
    lines += ["", "Served by the API server where the trees differ (median per run):", ""]
    if not summary["served"]:
        lines.append("- nothing differs by more than 5 % (and 2 requests)")
    lines += [f"- {k}: {v['this']:.0f} / {v['other']:.0f}" for k, v in summary["served"].items()]
    return "\n".join(lines) + "\n"


def write_ab(stem: str, meta: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    summary = summarize_ab(runs)
    bulky = ("ready_times", *(key for key, _ in LAGS))
    slim = [{k: v for k, v in r.items() if k not in bulky} for r in runs]
    record = {"meta": meta, "summary": summary, "runs": slim}
    (OUT / f"{stem}.json").write_text(json.dumps(record, indent=2) + "\n")
    text = render_ab(meta, summary)
    (OUT / f"{stem}.md").write_text(text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", required=True, help="the other tree's root (has operator/)")
    parser.add_argument("--services", type=int, default=300, help="N (default: %(default)s)")
    parser.add_argument("--pairs", type=int, default=2, help="arms per tree (%(default)s)")
    parser.add_argument("--stem", default="operator_ab", help="bench/results/<stem>.*")
    args = parser.parse_args()
    other = Path(args.other).resolve()
    if not (other / "operator" / "vllm_operator").is_dir():
        parser.error(f"--other {args.other}: no operator/vllm_operator there; give a tree's root")
    if args.services < 1 or args.pairs < 1:
        parser.error("--services and --pairs must be >= 1")
    kube, audit_log = connect(parser)
    env = {"this": {}, "other": {"PYTHONPATH": f"{other / 'operator'}:{other / 'twin'}"}}
    order = arm_order(args.pairs)
    meta = {
        "services": args.services,
        "command": " ".join(["python", "bench/operator_ab.py", *sys.argv[1:]]),
        "date": time.strftime("%Y-%m-%d"),
        "other": str(other),
        "order": order,
    }
    runs: list[dict[str, Any]] = []
    with bench_fleet(kube, args.services):
        for k, tree in enumerate(order):
            run = run_arm("operator", k, args.services, kube, audit_log, env=env[tree])
            runs.append({"tree": tree, **run})
            write_ab(args.stem, meta, runs)  # a session cut short keeps its runs
    print(write_ab(args.stem, meta, runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
