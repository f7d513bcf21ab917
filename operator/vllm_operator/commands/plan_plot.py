"""`plan --plot FILE.png`: output tokens/s per GPU against TTFT p95 (and ITL p95) per point.

Per GPU, because an open-loop workload's throughput is its arrival rate whatever serves it: what
a configuration buys is the load each GPU carries at that latency. The knee is the point of
highest power (throughput per GPU over TTFT p95, Kleinrock's measure); the chosen point is the
recommendation as evaluated on the search's scope.
"""

from __future__ import annotations

import math
from pathlib import Path

from vllm_operator.cli import UsageError
from vllm_operator.planning.candidate import Target
from vllm_operator.planning.evaluate import Point
from vllm_operator.planning.planner import PlanResult
from vllm_operator.planning.search import WHOLE


def per_gpu(point: Point) -> float:
    return point.output_tokens_per_s / max(point.gpu_hours_per_hour, 1e-9)


def knee(points: list[Point]) -> Point | None:
    measured = [p for p in points if p.ttft_p95_s > 0 and not math.isnan(p.ttft_p95_s)]
    return max(measured, key=lambda p: per_gpu(p) / p.ttft_p95_s, default=None)


def write_plot(path: str, result: PlanResult, target: Target) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [p for p in result.points if p.label != WHOLE]
    chosen = result.chosen.recommendation.candidate
    fig, axes = plt.subplots(1, 2 if target.itl is not None else 1, figsize=(11, 4.5))
    axes = list(axes) if target.itl is not None else [axes]
    panels = [
        ("ttft_p95_s", "TTFT p95 (ms)", target.ttft),
        ("itl_p95_s", "ITL p95 (ms)", target.itl),
    ]
    best = knee(points)
    for ax, (attr, label, limit) in zip(axes, panels, strict=False):
        for ok, colour, name in ((True, "tab:green", "meets SLO"), (False, "tab:red", "misses")):
            group = [p for p in points if p.meets_slo is ok]
            ax.scatter(
                [per_gpu(p) for p in group],
                [getattr(p, attr) * 1000 for p in group],
                c=colour,
                label=name,
                alpha=0.7,
            )
        for p in points:
            text = f"{p.candidate.replicas}x s{p.flags['max_num_seqs']}"
            ax.annotate(text, (per_gpu(p), getattr(p, attr) * 1000), fontsize=7)
        if limit is not None:
            ax.axhline(limit * 1000, color="grey", linestyle="--", label="SLO")
            ax.axhline(limit * (1 - target.margin) * 1000, color="grey", linestyle=":",
                       label=f"SLO less {target.margin:.0%} margin")  # fmt: skip
        if best is not None:
            ax.scatter([per_gpu(best)], [getattr(best, attr) * 1000], s=160, facecolors="none",
                       edgecolors="black", label="knee")  # fmt: skip
        mine = [p for p in points if p.candidate == chosen]
        if mine:
            ax.scatter([per_gpu(mine[0])], [getattr(mine[0], attr) * 1000], marker="*", s=220,
                       c="gold", edgecolors="black", label="chosen", zorder=5)  # fmt: skip
        ax.set_xlabel("output tokens/s per GPU")
        ax.set_ylabel(label)
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"vllm-operator plan: {result.chosen.gpu}, {len(points)} configurations")
    fig.tight_layout()
    try:
        fig.savefig(Path(path), dpi=110)
    except OSError as exc:
        raise UsageError(f"--plot {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # matplotlib's answer to a format it cannot write
        raise UsageError(f"--plot {path}: {str(exc).splitlines()[0]}") from None
    finally:
        plt.close(fig)
