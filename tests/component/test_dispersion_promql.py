"""The arrival dispersion query (metrics/queries.py) evaluated by Prometheus' own engine
(`promtool test rules`) against the control-loop bench's emulation of it (twin/vllm_twin/
observe.py ScrapeStore.arrival_dispersion), on the same counter samples.

Samples are 13 s apart, so no sample sits on a 30 s bin's edge in the window asked about:
Debian's promtool (Prometheus 2.x) closes a range on the left, Prometheus 3 and the emulation
leave it open, and a sample on an edge would count on both sides in one and one side in the
other. promtool comes with Debian's prometheus package (`make install-system`).
"""

from __future__ import annotations

import itertools
import math
import random
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
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


def replaced(values: dict[str, list[float]], gone: int, back: int) -> dict[str, list[float | None]]:
    """The first pod's requests served by a pod that answers up to sample `gone` and then by a
    new one that answers from sample `back` on (its counter from 0); the other pods as they
    are. None: no sample (the old pod left, the new one is not there yet)."""
    first, *others = values
    old = values[first]
    increments = [b - a for a, b in zip([0.0, *old], old, strict=False)]
    new = list(itertools.accumulate(increments[back:]))
    out: dict[str, list[float | None]] = {
        f"{first}-old": [*old[:gone], *[None] * (len(old) - gone)],
        f"{first}-new": [*[None] * back, *new],
    }
    return out | {pod: list(v) for pod, v in values.items() if pod in others}


def emulated(values: Mapping[str, Sequence[float | None]]) -> float | None:
    """The bench's emulation on the samples; a pod's None is a scrape it did not answer."""
    store = ScrapeStore(retention=math.inf)
    zero = dict.fromkeys(COUNTERS, 0.0)
    for k in range(EVAL // STEP + 1):
        store.scrape(
            k * STEP,
            {
                pod: None
                if (x := v[k]) is None
                else PodSample(k * STEP, 0.0, 0.0, 0.0, {**zero, "success": x}, {})
                for pod, v in values.items()
            },
        )
    return store.arrival_dispersion(EVAL, WINDOW)


def promtool_values(values: Sequence[float | None]) -> str:
    """promtool's notation: a missed scrape after a sample is a staleness marker (as Prometheus
    writes one), and `_` no sample."""
    out, seen = [], False
    for v in values:
        if v is not None:
            out.append(f"{v:g}")
        else:
            out.append("stale" if seen else "_")
        seen = v is not None
    return " ".join(out)


def prometheus(values: Mapping[str, Sequence[float | None]], tmp_path: Path) -> float:
    """The query's value at EVAL by promtool, to the 7 digits it prints."""
    expr = build_arrival_dispersion(build_selector(NS, NAME), build_range(WINDOW))
    series = [
        {
            "series": (
                f'vllm:request_success_total{{namespace="{NS}",'
                f'serving_vllmop_io_vllmservice="{NAME}",pod="{pod}"}}'
            ),
            "values": promtool_values(vals),
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


@pytest.mark.parametrize(
    ("seed", "burst_every", "gone", "back", "bursty"),
    [(5, 0, 70, 72, False), (6, 0, 70, 70, False), (7, 3, 70, 72, True), (8, 0, 80, 81, False)],
)
def test_a_pod_replaced_in_the_window_reads_the_same_in_both_and_is_no_burst(
    seed: int, burst_every: int, gone: int, back: int, bursty: bool, tmp_path: Path
) -> None:
    """A rollout in the window (810, 1140]: the first pod's load moves to a new pod, after a
    gap (the old one leaves at 910 s, the new one answers from 936 s) or none: bins in which
    the pods that answer differ have no count in either, so steady counts stay steady and
    bursts stay bursts (tests/unit/twin/test_observe.py shows the burst that counting only the
    pods present at both ends of a bin reads)."""
    values = replaced(counts(seed, burst_every), gone, back)
    mine = emulated(values)
    assert mine is not None
    assert prometheus(values, tmp_path) == pytest.approx(mine, rel=1e-6)
    assert (mine > 3) is bursty
