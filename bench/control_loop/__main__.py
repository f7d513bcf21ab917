"""python -m bench.control_loop [--quick] [--scenarios ...] [--policies ...] [--seeds N] [--jobs N]
[--settings name=value,...] [--out DIR]

Progress goes to stderr; the results table is printed and written with JSON and PNGs to --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from . import report
from .run import ABLATIONS, BOUNDS, POLICIES, run_all, with_seeds
from .scenarios import DEFAULT, QUICK, SEEDS, Scenario
from .settings_arg import FLAG as SETTINGS_FLAG
from .settings_arg import parse_settings

RESULTS = Path(__file__).resolve().parent.parent / "results"


def _select(args: argparse.Namespace) -> list[Scenario]:
    pool: tuple[Scenario, ...] = QUICK if args.quick else DEFAULT
    if args.scenarios:
        wanted = set(args.scenarios.split(","))
        pool = tuple(s for s in (*DEFAULT, *QUICK) if s.name in wanted)
        pool = tuple({s.name: s for s in reversed(pool)}.values())[::-1]  # DEFAULT's first
        unknown = sorted(wanted - {s.name for s in pool})
        if unknown:
            raise SystemExit(f"--scenarios: no scenario named {', '.join(unknown)}; known: "
                             + ", ".join(s.name for s in DEFAULT))  # fmt: skip
    if args.duration:
        pool = tuple(dataclasses.replace(s, duration=args.duration) for s in pool)
    return list(pool)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.control_loop", description=__doc__)
    p.add_argument("--quick", action="store_true", help="one short scenario (1-2 minutes)")
    p.add_argument("--scenarios", help="comma-separated names, e.g. l4-3b/conv")
    p.add_argument("--policies", default=",".join((*POLICIES, *BOUNDS)), help="comma-separated")
    p.add_argument("--duration", type=float, help="virtual seconds per scenario (override)")
    p.add_argument("--seeds", type=int, help=f"runs per scenario (default {SEEDS}, --quick 1)")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--out", type=Path, help="default bench/results (--quick: a temp dir)")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument(
        SETTINGS_FLAG,
        help="our policies' TuningSettings, e.g. forecast_headroom=0.8,under_window=300 "
        "(durations in seconds)",
    )
    args = p.parse_args(argv)
    out = args.out or (
        Path(tempfile.gettempdir()) / "control_loop_quick" if args.quick else RESULTS
    )
    started = time.perf_counter()
    load = round(os.getloadavg()[0], 2)
    seeds = args.seeds if args.seeds is not None else (1 if args.quick else SEEDS)
    if seeds < 1:
        raise SystemExit("--seeds must be at least 1")
    if args.jobs < 1:
        raise SystemExit("--jobs must be at least 1")
    policies = args.policies.split(",")
    known = (*POLICIES, *BOUNDS, *ABLATIONS)
    unknown = [name for name in policies if name not in known]
    if unknown:
        raise SystemExit(f"--policies: no policy named {', '.join(unknown)}; known: "
                         + ", ".join(known))  # fmt: skip
    overrides = parse_settings(args.settings)
    runs = with_seeds(_select(args), seeds)
    results = run_all(runs, policies, jobs=args.jobs, overrides=overrides)
    meta = {
        "command": " ".join(
            ["python -m bench.control_loop", *(sys.argv[1:] if argv is None else argv)]
        ),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {load} at start, "
        f"{args.jobs} jobs, Python {platform.python_version()}",
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    report.write(results, meta, out, plots=not args.no_plots)
    print(report.to_markdown(results, meta))
    print(f"written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
