"""Figures of the operator scale benchmark: per-run metrics in, ratios with spread out.

Pure except for write_report (files). A "raw" run applies the operator's rendered children
directly; an "operator" run applies the VLLMServices and lets the operator do it.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

# (key in a run's record, label, unit): the side-by-side table, in this order
METRICS: tuple[tuple[str, str, str], ...] = (
    ("all_ready_s", "time to all Ready (from the first apply)", "s"),
    ("creation_span_s", "creation span (first apply to last child created)", "s"),
    ("writes", "API writes in the namespace (every agent)", ""),
    ("apiserver_cpu_s", "kube-apiserver CPU", "CPU-s"),
    ("etcd_cpu_s", "etcd CPU", "CPU-s"),
    ("client_cpu_s", "operator CPU (raw: the bench's applier)", "CPU-s"),
    ("client_rss_mib", "operator peak RSS", "MiB"),
)


# per-service delays of the operator runs (key in a run's record, what it is)
LAGS: tuple[tuple[str, str], ...] = (
    ("ready_lags", "Ready written after the Deployment became available"),
    ("pickup_lags", "Deployment created after the VLLMService was"),
)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def pair_ratios(runs: list[dict[str, Any]], key: str) -> list[float]:
    """operator/raw for each operator run and the raw run next to it (alternating order)."""
    raw = [r for r in runs if r["arm"] == "raw"]
    op = [r for r in runs if r["arm"] == "operator"]
    return [
        o[key] / r[key]
        for o, r in zip(op, raw, strict=False)
        if o.get(key) is not None and r.get(key)
    ]


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for key, _, _ in METRICS:
        row: dict[str, Any] = {}
        for arm in ("raw", "operator"):
            values = [r[key] for r in runs if r["arm"] == arm and r.get(key) is not None]
            row[arm] = spread(values) if values else None
        ratios = pair_ratios(runs, key)
        row["ratio"] = spread(ratios) if ratios else None
        summary[key] = row
    for key, _ in LAGS:
        lags = [x for r in runs if r["arm"] == "operator" for x in r.get(key, [])]
        if lags:
            summary[key] = {
                "p50": round(percentile(lags, 0.5), 3),
                "p99": round(percentile(lags, 0.99), 3),
                "max": round(max(lags), 3),
            }
    profiles = profile_classes(runs)
    if profiles:
        summary["apiserver_profile"] = profiles
    return summary


def profile_classes(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Median CPU-s per class of the API server's profiles, per arm (runs without one left out;
    bench/apiserver_pprof.py)."""
    table: dict[str, dict[str, float]] = {}
    for arm in ("raw", "operator"):
        profiled = [r.get("apiserver_profile") or {} for r in runs if r["arm"] == arm]
        classes = [p["by_class"] for p in profiled if "by_class" in p]
        for name in classes[0] if classes else {}:
            table.setdefault(name, {})[arm] = round(
                statistics.median(c.get(name, 0.0) for c in classes), 2
            )
    return table


def render_profile(profiles: dict[str, dict[str, float]], seconds: int) -> list[str]:
    rows = [
        f"kube-apiserver CPU by what it was spent on, over the {seconds} s from each arm's first"
        " apply (median CPU-s of the arms' pprof profiles; bench/apiserver_pprof.py):",
        "",
        "| spent on | raw control plane | through the operator | difference |",
        "|---|---|---|---|",
    ]
    total = {"raw": 0.0, "operator": 0.0}
    for name, arms in profiles.items():
        raw, op = arms.get("raw"), arms.get("operator")
        total["raw"] += raw or 0.0
        total["operator"] += op or 0.0
        diff = f"{op - raw:+.2f}" if raw is not None and op is not None else "n/a"
        rows.append(f"| {name} | {_num(raw)} | {_num(op)} | {diff} |")
    rows.append(
        f"| all (sum of the medians) | {total['raw']:.2f} | {total['operator']:.2f}"
        f" | {total['operator'] - total['raw']:+.2f} |"
    )
    return rows


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _cell(stat: dict[str, float] | None, digits: int = 1) -> str:
    if stat is None:
        return "n/a"
    return f"{stat['median']:.{digits}f} ({stat['min']:.{digits}f}-{stat['max']:.{digits}f})"


def render_table(summary: dict[str, Any]) -> list[str]:
    rows = [
        "| metric | raw control plane | through the operator | operator / raw |",
        "|---|---|---|---|",
    ]
    for key, label, unit in METRICS:
        row = summary[key]
        suffix = f" ({unit})" if unit else ""
        digits = 0 if key == "writes" else 1
        rows.append(
            f"| {label}{suffix} | {_cell(row['raw'], digits)} | {_cell(row['operator'], digits)}"
            f" | {_cell(row['ratio'], 2) + 'x' if row['ratio'] else 'n/a'} |"
        )
    return rows


def render_markdown(meta: dict[str, Any], summary: dict[str, Any]) -> str:
    lines = [
        f"# Operator scale: {meta['services']} VLLMServices, operator vs raw control plane",
        "",
        f"`{meta['command']}` ({meta['date']}; {meta['runs']} alternating runs per arm,"
        f" {meta['concurrency']} client threads; {meta['workload']}). Median (min-max) over the"
        " runs; the ratio is taken per pair of neighbouring runs.",
        "",
        *render_table(summary),
        "",
    ]
    for key, label in LAGS:
        lag = summary.get(key)
        if lag:
            lines.append(
                f"- {label}: p50 {lag['p50']:.2f} s, p99 {lag['p99']:.2f} s,"
                f" max {lag['max']:.2f} s (all operator runs)."
            )
    idle = meta.get("idle")
    if idle:
        lines.append(
            f"- Idle: {idle['writes']} writes in {idle['seconds']:.0f} s after an operator restart"
            f" over the {meta['services']} Ready services (resync every {idle['resync']:.0f} s)."
        )
    profiles = summary.get("apiserver_profile")
    if profiles:
        lines += ["", *render_profile(profiles, int(meta.get("apiserver_profile_s") or 0))]
    return "\n".join(lines) + "\n"


def write_report(out: Path, stem: str, meta: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    """bench/results/<stem>.{json,md,png}; returns the markdown."""
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(runs)
    bulky = ("ready_times", *(key for key, _ in LAGS))
    slim = [{k: v for k, v in r.items() if k not in bulky} for r in runs]
    (out / f"{stem}.json").write_text(
        json.dumps({"meta": meta, "summary": summary, "runs": slim}, indent=2) + "\n"
    )
    text = render_markdown(meta, summary)
    (out / f"{stem}.md").write_text(text)
    plot(out / f"{stem}.png", meta, runs)
    return text


def plot(path: Path, meta: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for r in runs:
        times = sorted(r.get("ready_times", []))
        color = "tab:blue" if r["arm"] == "operator" else "tab:gray"
        left.plot(times, [(i + 1) / len(times) for i in range(len(times))], color=color, lw=1)
    left.plot([], [], color="tab:gray", label="raw control plane")
    left.plot([], [], color="tab:blue", label="through the operator")
    left.set_xlabel("seconds from the first apply")
    left.set_ylabel("fraction Ready")
    left.set_title(f"N={meta['services']}: services Ready over time, each run")
    left.legend()
    left.grid(alpha=0.3)
    for (key, label), color in zip(LAGS, ("tab:blue", "tab:orange"), strict=False):
        lags = sorted(x for r in runs if r["arm"] == "operator" for x in r.get(key, []))
        if lags:
            ys = [(i + 1) / len(lags) for i in range(len(lags))]
            right.plot(lags, ys, color=color, label=label)
    right.set_xlabel("seconds")
    right.legend(fontsize=8)
    right.set_ylabel("fraction of services")
    right.set_title("Per service, operator runs")
    right.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
