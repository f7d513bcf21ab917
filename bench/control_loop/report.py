"""The results: means over the seeds with 95% intervals, issue 14's targets checked, JSON, plots."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .harness import Outcome
from .run import ScenarioResult

OURS = ("ours-replicas", "ours-full")
SCHEDULE = "oracle-schedule"  # a bound run beside the policies (policies.OracleSchedule)
REACTIVE = ("hpa-waiting", "kpa-running", "wva-saturation")
# Student's t, two-sided 95%, by degrees of freedom (n - 1); 1.96 beyond the table
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


@dataclass(frozen=True)
class Stat:
    mean: float
    half: float  # half-width of the 95% interval (t distribution); 0 for one run

    def show(self, fmt: Callable[[float], str]) -> str:
        return fmt(self.mean) if self.half == 0 else f"{fmt(self.mean)} ± {fmt(self.half)}"


def stat(values: Sequence[float]) -> Stat:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return Stat(math.nan, 0.0)
    n = len(values)
    mean = sum(values) / n
    if n == 1:
        return Stat(mean, 0.0)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    t = _T95[n - 2] if n - 2 < len(_T95) else 1.96
    return Stat(mean, t * sd / math.sqrt(n))


FIGURES: dict[str, Callable[[ScenarioResult, Outcome], float]] = {
    "requests_in_slo": lambda sr, o: o.slo_share,
    "windows_in_slo": lambda sr, o: o.window_share,
    "rejected_share": lambda sr, o: o.rejected_share,
    "rejected": lambda sr, o: float(o.rejected),
    "gpu_hours": lambda sr, o: o.gpu_hours,
    # requests within the SLO per GPU-hour: what a budget lever buys at equal GPU-hours
    "goodput_per_gpu_hour": lambda sr, o: (
        o.slo_share * o.offered / o.gpu_hours if o.gpu_hours else 0.0
    ),
    "x_oracle": lambda sr, o: o.gpu_hours / sr.oracle.gpu_hours if sr.oracle.gpu_hours else 0.0,
    "scaling_actions": lambda sr, o: float(o.scaling_actions),
    "restarts": lambda sr, o: float(o.restarts),
    "rollout_short": lambda sr, o: float(o.rollout_short_windows),
    "ttft_p95": lambda sr, o: o.ttft_p95,
    "itl_p95": lambda sr, o: o.itl_p95,
}


@dataclass(frozen=True)
class Group:
    """One scenario over its seeds."""

    name: str
    runs: list[ScenarioResult]

    @property
    def feasible(self) -> bool:
        return all(all(sr.oracle.feasible) for sr in self.runs)

    def oracle_gpu(self) -> Stat:
        return stat([sr.oracle.gpu_hours for sr in self.runs])

    def policies(self) -> list[str]:
        return list(dict.fromkeys(p for sr in self.runs for p in sr.outcomes))

    def figure(self, policy: str, name: str) -> Stat:
        fn = FIGURES[name]
        return stat([fn(sr, sr.outcomes[policy]) for sr in self.runs if policy in sr.outcomes])


def group(results: Sequence[ScenarioResult]) -> list[Group]:
    out: dict[str, list[ScenarioResult]] = {}
    for sr in results:
        out.setdefault(sr.scenario.name, []).append(sr)
    return [Group(name, runs) for name, runs in out.items()]


def _pct(v: float) -> str:
    return f"{v:.1%}"


def _pct2(v: float) -> str:
    return f"{v:.2%}"


def _f2(v: float) -> str:
    return f"{v:.2f}"


def _f1(v: float) -> str:
    return f"{v:.1f}"


def _ms(v: float) -> str:
    return "-" if math.isnan(v) else f"{v * 1000:.0f}"


Check = tuple[str, bool | None, str]  # (target, met; None = not applicable, figures)


def check_targets(g: Group) -> list[Check]:
    """Issues 14 and 15 targets on this scenario's means (None where a policy did not run or the
    target does not apply)."""
    have = set(g.policies())
    out: list[Check] = []
    oracle = g.oracle_gpu().mean
    # what the oracle's own counts cost once pods hold their GPU while they load and drain
    bound = (
        f"; the oracle's schedule on the cluster: {g.figure(SCHEDULE, 'x_oracle').mean:.2f}x"
        if SCHEDULE in have
        else ""
    )
    for ours in (p for p in OURS if p in have):
        win, rej = g.figure(ours, "windows_in_slo").mean, g.figure(ours, "rejected_share").mean
        slo = win >= 0.99 and rej <= 0.005
        out.append((f"{ours}: >= 99% of windows and <= 0.5% 503s",
                    slo if g.feasible else None,
                    f"{win:.1%} windows, {rej:.2%} 503s"
                    + ("" if g.feasible else " (the oracle misses some block)")))  # fmt: skip
        gpu = g.figure(ours, "gpu_hours").mean
        out.append((f"{ours}: GPU-hours <= 1.10x the oracle", gpu <= 1.10 * oracle,
                    f"{gpu / oracle:.2f}x ({gpu:.2f} vs {oracle:.2f}{bound})"))  # fmt: skip
    if "ours-full" not in have:
        return out
    fig = lambda p, n: g.figure(p, n).mean  # noqa: E731
    # issue 15: the budget lever never costs what the replica lever would not
    short = fig("ours-full", "rollout_short")
    out.append(("ours-full: no window short of the pods needed for a rollout", short == 0,
                f"{short:.1f} windows"))  # fmt: skip
    if "ours-replicas" in have:
        full_win, rep_win = (
            fig("ours-full", "windows_in_slo"),
            fig("ours-replicas", "windows_in_slo"),
        )
        out.append(("ours-full: no fewer windows in SLO than ours-replicas", full_win >= rep_win,
                    f"{full_win:.1%} vs {rep_win:.1%}"))  # fmt: skip
        full_good, rep_good = (
            fig("ours-full", "goodput_per_gpu_hour"),
            fig("ours-replicas", "goodput_per_gpu_hour"),
        )
        more = full_good / rep_good - 1 if rep_good else math.nan
        lever = g.runs[0].scenario.lever
        out.append(("ours-full: >= 15 points more windows in SLO or >= 15% more goodput per "
                    "GPU-hour than ours-replicas (the lever scenarios)",
                    (full_win - rep_win >= 0.15 or more >= 0.15) if lever else None,
                    f"{(full_win - rep_win) * 100:+.1f} points, goodput per GPU-h "
                    f"{full_good:.0f} vs {rep_good:.0f} ({more:+.0%})"))  # fmt: skip
    gpu, win = fig("ours-full", "gpu_hours"), fig("ours-full", "windows_in_slo")
    if "static-peak" in have:
        saved = 1 - gpu / fig("static-peak", "gpu_hours")
        peak_win = fig("static-peak", "windows_in_slo")
        out.append(("ours-full: >= 25% fewer GPU-hours than static-peak, no fewer windows",
                    saved >= 0.25 and win >= peak_win,
                    f"{saved:.0%} fewer, windows {win:.1%} vs {peak_win:.1%}"))  # fmt: skip
    rejected, actions = fig("ours-full", "rejected"), fig("ours-full", "scaling_actions")
    for base in (p for p in REACTIVE if p in have):
        theirs, their_gpu = fig(base, "rejected"), fig(base, "gpu_hours")
        figures = f"503s {rejected:.0f} vs {theirs:.0f}, GPU-h {gpu:.2f} vs {their_gpu:.2f}"
        applies = theirs > 0 and their_gpu >= gpu  # "at no more GPU-hours, where they reject"
        met = rejected * 10 <= theirs if applies else None
        out.append((f"ours-full: >= 10x fewer 503s than {base} (where it rejects, at no more "
                    "GPU-h)", met, figures))  # fmt: skip
        theirs_actions = fig(base, "scaling_actions")
        out.append((f"ours-full: >= 30% fewer scaling actions than {base}",
                    actions <= 0.7 * theirs_actions,
                    f"{actions:.1f} vs {theirs_actions:.1f} actions"))  # fmt: skip
    return out


def _row(g: Group, policy: str) -> str:
    f = g.figure
    return (
        f"| {g.name} | {policy} | {f(policy, 'requests_in_slo').show(_pct)} "
        f"| {f(policy, 'windows_in_slo').show(_pct)} | {f(policy, 'rejected_share').show(_pct2)} "
        f"| {f(policy, 'gpu_hours').show(_f2)} | {f(policy, 'x_oracle').show(_f2)} "
        f"| {f(policy, 'scaling_actions').show(_f1)} | {f(policy, 'restarts').show(_f1)} "
        f"| {f(policy, 'rollout_short').show(_f1)} "
        f"| {_ms(f(policy, 'ttft_p95').mean)} | {_ms(f(policy, 'itl_p95').mean)} |"
    )


def _header(groups: Sequence[Group], meta: dict[str, Any]) -> list[str]:
    seeds = max((len(g.runs) for g in groups), default=0)
    lines = [
        "# Control-loop benchmark",
        "",
        f"`{meta['command']}`: {meta['date']}, {meta['machine']}, {meta['wall_seconds']:.0f} s "
        f"wall. {seeds} seeds per scenario; figures are means over them, ± the half-width of "
        "the 95% interval (Student's t). Seeds are fixed: the same command gives the same "
        "figures. Method, policies and caveats: docs/benchmarks.md.",
        "",
        "Columns: requests whose TTFT and own ITL p95 met the SLO (503s count as misses); "
        "1-minute windows (by arrival) whose TTFT and ITL p95 met the SLO; 503 share (vLLM "
        "admission, or no ready replica); GPU-hours from pod creation to drain; the same over "
        "the oracle's; replica changes; pods replaced by budget retunes; p95 over the run (ms).",
        "",
    ]
    for g in groups:
        first = g.runs[0]
        s, p = first.scenario, first.scenario.profile
        lines.append(
            f"- **{g.name}**: {p.gpu} + {p.model}, {s.describe()}; SLO TTFT p95 "
            f"{p.slo.ttft * 1000:.0f} ms, ITL p95 {p.slo.itl * 1000:.0f} ms, 503s <= 0.5%; "
            f"spec budgets {p.budgets()}; oracle counts per {first.oracle.block:.0f} s "
            f"(first seed): {first.oracle.counts}"
            + ("" if g.feasible else " (some blocks missed the SLO even at max)")
        )
    return lines


def to_markdown(results: Sequence[ScenarioResult], meta: dict[str, Any]) -> str:
    groups = group(results)
    lines = _header(groups, meta)
    lines += [
        "",
        "| scenario | policy | requests in SLO | windows in SLO | 503s | GPU-h | x oracle "
        "| scaling actions | pod restarts | windows short for a rollout | TTFT p95 | ITL p95 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for g in groups:
        lines.append(
            f"| {g.name} | oracle (bound) | - | - | - | {g.oracle_gpu().show(_f2)} "
            "| 1.00 | - | - | - | - |"
        )
        lines += [_row(g, policy) for policy in g.policies()]
    checks = {g.name: check_targets(g) for g in groups}
    names = list(dict.fromkeys(t for c in checks.values() for t, _, _ in c))
    lines += ["", "## Targets (issues 14 and 15), on the means", ""]
    lines += ["| target | met in | not met in |", "|---|---|---|"]
    for name in names:
        met_in = [s for s, c in checks.items() for t, m, _ in c if t == name and m is True]
        missed = [s for s, c in checks.items() for t, m, _ in c if t == name and m is False]
        lines.append(f"| {name} | {', '.join(met_in) or '-'} | {', '.join(missed) or '-'} |")
    lines += ["", "| target | scenario | met | figures |", "|---|---|---|---|"]
    for name in names:
        for scenario, c in checks.items():
            for target, met, figures in c:
                if target == name:
                    mark = "n/a" if met is None else ("yes" if met else "**no**")
                    lines.append(f"| {name} | {scenario} | {mark} | {figures} |")
    lines += ["", "## What ours-full did (first seed)", ""]
    for g in groups:
        ours = g.runs[0].outcomes.get("ours-full")
        if ours is None:
            continue
        reasons = ", ".join(f"{k} {v}" for k, v in ours.notes.items())
        lines += [f"**{g.name}**: decisions by reason: {reasons}.", ""]
        lines += [f"    {line}" for line in ours.log[:25]]
        if len(ours.log) > 25:
            lines.append(f"    ... {len(ours.log) - 25} more")
        lines.append("")
    return "\n".join(lines)


def to_json(results: Sequence[ScenarioResult], meta: dict[str, Any]) -> str:
    groups = group(results)
    firsts = {g.name: g.runs[0] for g in groups}
    data = {
        "meta": meta,
        "summary": [
            {
                "name": g.name,
                "seeds": [sr.scenario.seed for sr in g.runs],
                "oracle_gpu_hours": asdict(g.oracle_gpu()),
                "policies": {
                    p: {name: asdict(g.figure(p, name)) for name in FIGURES} for p in g.policies()
                },
                "targets": [{"target": t, "met": m, "figures": f} for t, m, f in check_targets(g)],
            }
            for g in groups
        ],
        "runs": [
            {
                "name": sr.scenario.name,
                "seed": sr.scenario.seed,
                "description": sr.scenario.describe(),
                "oracle": asdict(sr.oracle),
                "outcomes": {
                    name: _outcome_json(out, first=sr is firsts[sr.scenario.name])
                    for name, out in sr.outcomes.items()
                },
            }
            for sr in results
        ],
    }
    return json.dumps(_no_nan(data), indent=None, allow_nan=False) + "\n"


_SERIES = ("timeline", "minute_ttft_p95", "log")  # the first seed's are enough to read and plot


def _outcome_json(out: Outcome, first: bool) -> dict[str, Any]:
    data = asdict(out)
    return data if first else {k: v for k, v in data.items() if k not in _SERIES}


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

        groups = group(results)
        plot_timelines([g.runs[0] for g in groups], out / "control_loop.timeline.png")
        plot_tradeoff(groups, out / "control_loop.tradeoff.png")
