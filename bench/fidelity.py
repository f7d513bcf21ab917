"""How close the twin is to measured vLLM: every point of the measurement set, simulated.

    .venv/bin/python bench/fidelity.py [--profiles FILE] [--only SUBSTRING] [--out DIR]

Each point of twin/calibration/measurements.yaml whose GPU and model have a twin profile is
replayed with its source's workload (vllm_twin.calibration.replay says how), and each measured
quantity is set beside the simulated one. Writes bench/results/fidelity.json (every comparison),
.md (tables and the summary, fit and held-out apart) and .png (parity plots). A figure, not a
test: nothing here passes or fails.

error = (simulated - measured) / measured; the summary gives the median and the worst |error| of
each group (TTFT, TPOT/ITL, throughput, end-to-end latency) per split.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vllm_operator.sim.catalog import Catalog, load_catalog
from vllm_twin.calibration.measurements import MeasurementSet, load_measurements
from vllm_twin.calibration.replay import GROUPS, NotSimulableError, Replayed, replay_point

RESULTS = Path(__file__).resolve().parent / "results"
SPLITS = ("fit", "heldout")
GROUP_ORDER = tuple(dict.fromkeys(GROUPS.values()))


@dataclass(frozen=True)
class Row:
    point: str
    split: str
    gpu: str
    model: str
    quantity: str
    group: str
    measured: float
    simulated: float
    error: float


@dataclass(frozen=True)
class Outcome:
    rows: tuple[Row, ...]
    skipped: tuple[tuple[str, str, str], ...]  # (point, split, why)
    notes: tuple[tuple[str, str], ...]  # (point, note)
    excluded: tuple[tuple[str, str, str], ...] = ()  # (point, quantity, why)


def evaluate(measurements: MeasurementSet, catalog: Catalog, only: str | None = None) -> Outcome:
    """Replay every point (those whose id contains `only`) and compare; pure but for time."""
    rows: list[Row] = []
    skipped: list[tuple[str, str, str]] = []
    notes: list[tuple[str, str]] = []
    excluded: list[tuple[str, str, str]] = []
    for point in measurements.points:
        if only is not None and only not in point.id:
            continue
        excluded += [(point.id, name, why) for name, why in point.excluded.items()]
        try:
            replayed: Replayed = replay_point(point, catalog)
        except NotSimulableError as exc:
            skipped.append((point.id, point.split, str(exc)))
            continue
        if replayed.note:
            notes.append((point.id, replayed.note))
        for c in replayed.comparisons:
            rows.append(
                Row(
                    point.id,
                    point.split,
                    point.setup.gpu_profile or "",
                    point.setup.model_profile or "",
                    c.quantity,
                    c.group,
                    c.measured,
                    c.simulated,
                    c.error,
                )
            )
    return Outcome(tuple(rows), tuple(skipped), tuple(notes), tuple(excluded))


def summarize(rows: Iterable[Row]) -> dict[str, dict[str, dict[str, Any]]]:
    """split -> group -> count, median |error|, worst |error| and the worst point."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    rows = list(rows)
    for split in SPLITS:
        for group in (*GROUP_ORDER, "all"):
            mine = [r for r in rows if r.split == split and group in (r.group, "all")]
            if not mine:
                continue
            worst = max(mine, key=lambda r: abs(r.error))
            out.setdefault(split, {})[group] = {
                "count": len(mine),
                "points": len({r.point for r in mine}),
                "median_abs_error": statistics.median(abs(r.error) for r in mine),
                "worst_abs_error": abs(worst.error),
                "worst": f"{worst.point} {worst.quantity}",
            }
    return out


def _pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:+.1%}"


def render_markdown(outcome: Outcome, summary: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [
        "# Twin fidelity against measured vLLM",
        "",
        f"`{meta['command']}` at {meta['date']}; profiles: {meta['profiles']}.",
        "error = (simulated - measured) / measured. Never pass/fail.",
        "",
        "## Summary",
        "",
        "| split | group | quantities | points | median abs error | worst abs error | worst at |",
        "|---|---|---|---|---|---|---|",
    ]
    for split, groups in summary.items():
        for group, s in groups.items():
            lines.append(
                f"| {split} | {group} | {s['count']} | {s['points']} | "
                f"{s['median_abs_error']:.1%} | {s['worst_abs_error']:.1%} | {s['worst']} |"
            )
    for split in SPLITS:
        lines += ["", f"## {split}", "", "| point | quantity | measured | simulated | error |"]
        lines.append("|---|---|---|---|---|")
        for r in outcome.rows:
            if r.split == split:
                lines.append(
                    f"| {r.point} | {r.quantity} | {r.measured:.4g} | {r.simulated:.4g} | "
                    f"{_pct(r.error)} |"
                )
    if outcome.notes:
        lines += ["", "## Notes", ""]
        lines += [f"- {point}: {note}" for point, note in outcome.notes]
    if outcome.excluded:
        lines += ["", "## Excluded (neither fitted nor judged)", ""]
        lines += [f"- {point} {name}: {why}" for point, name, why in outcome.excluded]
    if outcome.skipped:
        lines += ["", "## Not simulated", ""]
        lines += [f"- {point} ({split}): {why}" for point, split, why in outcome.skipped]
    return "\n".join(lines) + "\n"


def write_plot(rows: Sequence[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 6))
    markers = dict(zip(GROUP_ORDER, "os^D", strict=False))
    for ax, split in zip(axes, SPLITS, strict=True):
        mine = [r for r in rows if r.split == split]
        for group in GROUP_ORDER:
            pts = [(r.measured, r.simulated) for r in mine if r.group == group]
            if pts:
                xs, ys = zip(*pts, strict=True)
                ax.scatter(xs, ys, marker=markers[group], label=group, alpha=0.7)
        values = [v for r in mine for v in (r.measured, r.simulated) if v > 0]
        if values:
            low, high = min(values) / 2, max(values) * 2
            ax.plot([low, high], [low, high], "k-", lw=0.8)
            for k in (0.75, 1.25):
                ax.plot([low, high], [low * k, high * k], "k:", lw=0.6)
            ax.set_xlim(low, high)
            ax.set_ylim(low, high)
            ax.legend()
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{split}: simulated vs measured (dotted: +-25%)")
        ax.set_xlabel("measured (ms, req/s or tok/s)")
        ax.set_ylabel("simulated")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profiles", help="profile YAML overriding the shipped ones")
    p.add_argument("--only", help="only points whose id contains this")
    p.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    args = p.parse_args(argv)
    outcome = evaluate(load_measurements(), load_catalog(args.profiles), args.only)
    summary = summarize(outcome.rows)
    meta = {
        "command": "python bench/fidelity.py" + (" " + " ".join(argv) if argv else ""),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "profiles": args.profiles or "shipped (operator/vllm_operator/sim/profiles/)",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    data = {
        **meta,
        "summary": summary,
        "rows": [r.__dict__ for r in outcome.rows],
        "notes": [{"point": p_, "note": n} for p_, n in outcome.notes],
        "skipped": [{"point": p_, "split": s, "why": w} for p_, s, w in outcome.skipped],
        "excluded": [{"point": p_, "quantity": q, "why": w} for p_, q, w in outcome.excluded],
    }
    (args.out / "fidelity.json").write_text(json.dumps(data, indent=2) + "\n", "utf-8")
    (args.out / "fidelity.md").write_text(render_markdown(outcome, summary, meta), "utf-8")
    write_plot(outcome.rows, args.out / "fidelity.png")
    for split, groups in summary.items():
        for group, s in groups.items():
            print(
                f"{split:8} {group:11} n={s['count']:3}  median {s['median_abs_error']:6.1%}  "
                f"worst {s['worst_abs_error']:7.1%}  ({s['worst']})"
            )
    for point, name, why in outcome.excluded:
        print(f"excluded {point} {name}: {why}")
    print(f"wrote {args.out}/fidelity.{{json,md,png}}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
