"""The results: a markdown table, the targets of issue 6 checked one by one, JSON, and plots."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .harness import Outcome
from .run import ScenarioResult

TARGET_NAMES = (
    "ours-full: >= 99% of windows in SLO and <= 0.5% 503s",
    "ours-full: GPU-hours <= 1.10x the oracle",
    "ours-full: >= 25% fewer GPU-hours than static-peak",
    "ours-full: >= 10x fewer 503s than hpa-waiting, at no more GPU-hours",
    "ours-full: >= 30% fewer scaling actions than kpa-running",
)


def _ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:.0f}"


def check_targets(sr: ScenarioResult) -> list[tuple[str, bool | None, str]]:
    """(target, met, the figures behind it); met is None when a policy it needs did not run."""
    o, oracle = sr.outcomes, sr.oracle
    ours = o.get("ours-full")
    if ours is None:
        return [(name, None, "ours-full not run") for name in TARGET_NAMES]
    out: list[tuple[str, bool | None, str]] = [
        (
            TARGET_NAMES[0],
            ours.window_share >= 0.99 and ours.rejected_share <= 0.005,
            f"{ours.window_share:.1%} windows, {ours.rejected_share:.2%} 503s",
        ),
        (
            TARGET_NAMES[1],
            ours.gpu_hours <= 1.10 * oracle.gpu_hours,
            f"{ours.gpu_hours / oracle.gpu_hours:.2f}x ({ours.gpu_hours:.2f} vs "
            f"{oracle.gpu_hours:.2f} GPU-h)",
        ),
    ]
    peak, hpa, kpa = o.get("static-peak"), o.get("hpa-waiting"), o.get("kpa-running")
    if peak is None:
        out.append((TARGET_NAMES[2], None, "static-peak not run"))
    else:
        saved = 1 - ours.gpu_hours / peak.gpu_hours
        out.append((TARGET_NAMES[2], saved >= 0.25, f"{saved:.0%} fewer"))
    if hpa is None:
        out.append((TARGET_NAMES[3], None, "hpa-waiting not run"))
    else:
        figures = (
            f"503s {ours.rejected} vs {hpa.rejected}, GPU-h {ours.gpu_hours:.2f} vs "
            f"{hpa.gpu_hours:.2f}"
        )
        if hpa.rejected == 0:  # nothing to be 10x fewer than
            out.append((TARGET_NAMES[3], None, f"{figures} (no 503s to compare)"))
        else:
            met = ours.rejected * 10 <= hpa.rejected and ours.gpu_hours <= hpa.gpu_hours
            out.append((TARGET_NAMES[3], met, figures))
    if kpa is None:
        out.append((TARGET_NAMES[4], None, "kpa-running not run"))
    else:
        met = ours.scaling_actions <= 0.7 * kpa.scaling_actions
        out.append(
            (TARGET_NAMES[4], met, f"{ours.scaling_actions} vs {kpa.scaling_actions} actions")
        )
    return out


def _row(sr: ScenarioResult, out: Outcome) -> str:
    ratio = out.gpu_hours / sr.oracle.gpu_hours if sr.oracle.gpu_hours else math.nan
    return (
        f"| {sr.scenario.name} | {out.policy} | {out.slo_share:.1%} | {out.window_share:.1%} "
        f"| {out.rejected_share:.2%} | {out.gpu_hours:.2f} | {ratio:.2f} | {out.scaling_actions} "
        f"| {out.restarts} | {_ms(out.ttft_p95)} | {_ms(out.itl_p95)} |"
    )


def to_markdown(results: Sequence[ScenarioResult], meta: dict[str, Any]) -> str:
    lines = [
        "# Control-loop benchmark",
        "",
        f"`{meta['command']}`: {meta['date']}, {meta['machine']}, {meta['wall_seconds']:.0f} s "
        "wall. Seeds are fixed: the same command gives the same figures. Method, policies and "
        "caveats: docs/benchmarks.md.",
        "",
        "Columns: requests whose TTFT and own ITL p95 met the SLO (503s count as misses); "
        "1-minute windows (by arrival) whose TTFT and ITL p95 met the SLO; 503 share (vLLM "
        "admission, or no ready replica); GPU-hours from pod creation to drain; the same over "
        "the oracle's; replica changes; pods replaced by budget retunes; p95 over the run (ms).",
        "",
    ]
    for sr in results:
        s, p = sr.scenario, sr.scenario.profile
        lines.append(
            f"- **{s.name}**: {p.gpu} + {p.model}, {s.describe()}; SLO TTFT p95 "
            f"{p.slo.ttft * 1000:.0f} ms, ITL p95 {p.slo.itl * 1000:.0f} ms, 503s <= 0.5%; "
            f"spec budgets {p.budgets()}; "
            f"oracle counts per {sr.oracle.block:.0f} s: {sr.oracle.counts}"
            + ("" if all(sr.oracle.feasible) else " (some blocks missed the SLO even at max)")
        )
    lines += [
        "",
        "| scenario | policy | requests in SLO | windows in SLO | 503s | GPU-h | x oracle "
        "| scaling actions | pod restarts | TTFT p95 | ITL p95 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for sr in results:
        lines.append(
            f"| {sr.scenario.name} | oracle (bound) | - | - | - | {sr.oracle.gpu_hours:.2f} "
            "| 1.00 | - | - | - | - |"
        )
        lines += [_row(sr, out) for out in sr.outcomes.values()]
    lines += ["", "## Targets (issue 6), policy 6 = ours-full", ""]
    checks = {sr.scenario.name: check_targets(sr) for sr in results}
    lines += ["| target | met in | not met in |", "|---|---|---|"]
    for k, name in enumerate(TARGET_NAMES):
        met_in = [s for s, c in checks.items() if c[k][1] is True]
        missed = [s for s, c in checks.items() if c[k][1] is False]
        lines.append(f"| {name} | {', '.join(met_in) or '-'} | {', '.join(missed) or '-'} |")
    lines += ["", "| target | scenario | met | figures |", "|---|---|---|---|"]
    for name in TARGET_NAMES:
        for sr in results:
            for target, met, figures in check_targets(sr):
                if target == name:
                    mark = "n/a" if met is None else ("yes" if met else "**no**")
                    lines.append(f"| {name} | {sr.scenario.name} | {mark} | {figures} |")
    lines += ["", "## What ours-full did", ""]
    for sr in results:
        ours = sr.outcomes.get("ours-full")
        if ours is None:
            continue
        reasons = ", ".join(f"{k} {v}" for k, v in ours.notes.items())
        lines += [f"**{sr.scenario.name}**: decisions by reason: {reasons}.", ""]
        lines += [f"    {line}" for line in ours.log[:40]]
        if len(ours.log) > 40:
            lines.append(f"    ... {len(ours.log) - 40} more")
        lines.append("")
    return "\n".join(lines)


def to_json(results: Sequence[ScenarioResult], meta: dict[str, Any]) -> str:
    data = {
        "meta": meta,
        "scenarios": [
            {
                "name": sr.scenario.name,
                "description": sr.scenario.describe(),
                "oracle": asdict(sr.oracle),
                "outcomes": {name: asdict(out) for name, out in sr.outcomes.items()},
                "targets": [{"target": t, "met": m, "figures": f} for t, m, f in check_targets(sr)],
            }
            for sr in results
        ],
    }
    return json.dumps(_no_nan(data), indent=1, allow_nan=False) + "\n"


def _no_nan(value: Any) -> Any:
    """JSON has no NaN (a p95 of no request): null instead."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_no_nan(v) for v in value]
    return value


def write(results: Sequence[ScenarioResult], meta: dict[str, Any], out: Path, plots: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "control_loop.md").write_text(to_markdown(results, meta), encoding="utf-8")
    (out / "control_loop.json").write_text(to_json(results, meta), encoding="utf-8")
    if plots:
        from .plots import plot_timelines, plot_tradeoff  # matplotlib only when asked

        plot_timelines(results, out / "control_loop.timeline.png")
        plot_tradeoff(results, out / "control_loop.tradeoff.png")
