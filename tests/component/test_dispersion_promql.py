"""The arrival dispersion query (metrics/queries.py) evaluated by Prometheus' own engine
(`promtool test rules`) against the control-loop bench's emulation of it (twin/vllm_twin/
observe.py ScrapeStore.arrival_dispersion), on the same counter samples.

Samples are 13 s apart, so no sample sits on a 30 s bin's edge in the window asked about:
Debian's promtool (Prometheus 2.x) closes a range on the left, Prometheus 3 and the emulation
leave it open, and a sample on an edge would count on both sides in one and one side in the
other. promtool comes with Debian's prometheus package (`make install-system`).
"""

from __future__ import annotations

import math
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from vllm_operator.metrics.queries import build_arrival_dispersion, build_range, build_selector
from vllm_twin.observe import COUNTERS, PodSample, ScrapeStore

NS, NAME = "team-a", "chat"
STEP = 13  # seconds between samples: 13 and 30 meet only at multiples of 390
EVAL = 1150  # the bins it reads span (810, 1140]: no multiple of 390 inside
WINDOW = 300.0
PODS = ("chat-a", "chat-b")


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool missing: `make install-system` installs Debian's prometheus package"
    return path


def counts(seed: int, burst_every: int, step_at: int | None = None) -> dict[str, list[float]]:
    """Per pod, the counter's value at every STEP from 0 to EVAL: a few requests a sample
    (three times as many from sample `step_at` on), and a burst of 20-60 every `burst_every`
    samples (never, when 0)."""
    rng = random.Random(seed)
    out: dict[str, list[float]] = {}
    for pod in PODS:
        total, values = 0.0, []
        for k in range(EVAL // STEP + 1):
            total += rng.randint(1, 5) * (3 if step_at is not None and k >= step_at else 1)
            if burst_every and k % burst_every == 0:
                total += rng.randint(20, 60)
            values.append(total)
        out[pod] = values
    return out


def emulated(values: dict[str, list[float]]) -> float | None:
    store = ScrapeStore(retention=math.inf)
    zero = dict.fromkeys(COUNTERS, 0.0)
    for k in range(EVAL // STEP + 1):
        store.scrape(
            k * STEP,
            {
                pod: PodSample(k * STEP, 0.0, 0.0, 0.0, {**zero, "success": v[k]}, {})
                for pod, v in values.items()
            },
        )
    return store.arrival_dispersion(EVAL, WINDOW)


def prometheus(values: dict[str, list[float]], tmp_path: Path) -> float:
    """The query's value at EVAL by promtool, to the 7 digits it prints."""
    expr = build_arrival_dispersion(build_selector(NS, NAME), build_range(WINDOW))
    series = [
        {
            "series": (
                f'vllm:request_success_total{{namespace="{NS}",'
                f'serving_vllmop_io_vllmservice="{NAME}",pod="{pod}"}}'
            ),
            "values": " ".join(f"{v:g}" for v in vals),
        }
        for pod, vals in values.items()
    ]
    test = {
        "rule_files": [],
        "evaluation_interval": f"{STEP}s",
        "tests": [
            {
                "interval": f"{STEP}s",
                "input_series": series,
                # a wrong value fails with promtool's "got" list, which the test reads
                "promql_expr_test": [
                    {"expr": expr, "eval_time": f"{EVAL}s", "exp_samples": [{"value": -1}]}
                ],
            }
        ],
    }
    path = tmp_path / "dispersion.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    proc = subprocess.run(
        [promtool(), "test", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    out = proc.stdout + proc.stderr
    found = re.search(r"got: \{\} (\S+)", out)
    assert found, out
    return float(found.group(1))


@pytest.mark.parametrize(
    ("seed", "burst_every", "step_at", "bursty"),
    [(1, 0, None, False), (2, 7, None, True), (3, 3, None, True), (4, 0, 78, False)],
)
def test_prometheus_and_the_bench_emulation_give_the_same_dispersion(
    seed: int, burst_every: int, step_at: int | None, bursty: bool, tmp_path: Path
) -> None:
    """Steady counts, bursts every 91 s or 39 s, and a load that triples at 1014 s (one
    change, left out): the same figure from both, over 3 only with bursts."""
    values = counts(seed, burst_every, step_at)
    mine = emulated(values)
    assert mine is not None
    assert prometheus(values, tmp_path) == pytest.approx(mine, rel=1e-6)
    assert (mine > 3) is bursty
