"""PNG figures: replicas and per-minute p95 TTFT over time per policy; GPU-hours vs SLO windows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from .measure import WINDOW
from .report import Group
from .run import POLICIES, ScenarioResult

# matplotlib's tab10, one colour per policy in the table's order
_TAB10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#e377c2", "#9467bd", "#8c564b")
COLORS = {
    **dict(zip(POLICIES, _TAB10, strict=True)),
    "oracle-schedule": "#17becf",
    "ours-reactive": "#7f7f7f",
    "ours-observed": "#bcbd22",
}


def plot_timelines(results: Sequence[ScenarioResult], path: Path) -> None:
    fig, axes = plt.subplots(
        len(results), 2, figsize=(15, 3.2 * len(results)), squeeze=False, sharex="row"
    )
    for row, sr in zip(axes, results, strict=True):
        left, right = row
        oracle = sr.oracle
        edges = [i * oracle.block / 60 for i in range(len(oracle.counts) + 1)]
        left.stairs(oracle.counts, edges, color="black", linestyle=":", label="oracle")
        for name, out in sr.outcomes.items():
            color = COLORS.get(name)
            minutes = [t / 60 for t, _, _ in out.timeline]
            left.step(minutes, [n for _, n, _ in out.timeline], where="post", color=color,
                      label=name, linewidth=1.2)  # fmt: skip
            p95 = [math.nan if v is None else v for v in out.minute_ttft_p95]
            mids = [(k + 0.5) * WINDOW / 60 for k in range(len(p95))]
            right.plot(mids, p95, color=color, label=name, linewidth=1.0)
        right.axhline(sr.scenario.profile.slo.ttft, color="red", linestyle="--", label="SLO")
        right.set_yscale("log")
        left.set_title(f"{sr.scenario.name}: replicas asked for (starting + ready)")
        right.set_title(f"{sr.scenario.name}: p95 TTFT per minute (completed requests)")
        left.set_ylabel("replicas")
        right.set_ylabel("seconds")
        for ax in row:
            ax.set_xlabel("minutes")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, ncol=2)
    axes[0][1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def plot_tradeoff(groups: Sequence[Group], path: Path) -> None:
    """Per scenario: mean GPU-hours against mean windows in SLO, bars the 95% intervals."""
    cols = min(4, len(groups))
    rows = math.ceil(len(groups) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.6 * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax, g in zip(flat, groups, strict=False):
        ax.axvline(g.oracle_gpu().mean, color="black", linestyle=":", label="oracle GPU-h")
        for name in g.policies():
            gpu, win = g.figure(name, "gpu_hours"), g.figure(name, "windows_in_slo")
            ax.errorbar(gpu.mean, win.mean * 100, xerr=gpu.half, yerr=win.half * 100, fmt="o",
                        color=COLORS.get(name), label=name, capsize=2)  # fmt: skip
        ax.set_title(g.name)
        ax.set_xlabel("GPU-hours")
        ax.set_ylabel("% of 1-min windows in SLO")
        ax.grid(alpha=0.3)
    for ax in flat[len(groups) :]:
        ax.axis("off")
    flat[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
