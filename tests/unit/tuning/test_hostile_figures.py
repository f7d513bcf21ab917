"""decide() never acts on figures no engine produces, whatever Prometheus answers.

Generated answers replace the recorded ones (tests/fixtures/prometheus) figure by figure with
NaN, infinities, negatives, absurd magnitudes and ordinary values; the real adapter builds the
snapshot and the real decide() runs on it. A bad figure must end in a HoldMetrics* decision whose
message names it; and no MetricsSnapshot can even be built holding one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from dataclasses import fields, replace
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.unit.metrics.fake import FakePrometheus, Recording, load
from tests.unit.tuning.support import spec, state
from vllm_operator.metrics.prometheus import query_snapshot
from vllm_operator.metrics.queries import SINGLE_SERIES, Figure, build_snapshot_queries
from vllm_operator.metrics.snapshot import TRAFFIC_FIGURES
from vllm_operator.tuning.decide import decide
from vllm_operator.tuning.model import (
    PLAUSIBLE_MAX,
    FleetView,
    ImplausibleFigureError,
    MetricsSnapshot,
    PodFigures,
)

PROPERTY_EXAMPLES = 400
TRAFFIC = load("traffic-two-pods.json")
IDLE = load("idle-two-pods.json")
POD_A, POD_B = "chat-6d5f8b7c9-x2x4q", "chat-6d5f8b7c9-k8m2p"
FLEET = FleetView(desired=2, ready=2, updated=2, rolling=False)
SINGLES = sorted(SINGLE_SERIES)
POD_GAUGES: tuple[Figure, ...] = ("pod_running", "pod_waiting", "pod_kv_usage")
REASONS = ("max_num_queued_reqs", "max_num_queued_tokens")

VALUES = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, -1.0, -1e-9, 0.0, 0.5, 1.0, 3.0, 1e7, 1e12]),
    st.floats(allow_nan=True, allow_infinity=True),
)


def _show(value: float) -> str:
    return "NaN" if math.isnan(value) else ("+Inf" if value == math.inf else repr(value))


def _bound(figure: str) -> float:
    name = figure.removeprefix("pod_")
    return PLAUSIBLE_MAX.get("rejection_rate" if figure == "rejection_rate_by_reason" else name)


def _bad(figure: str, value: float, traffic: bool, asked: Collection[str]) -> bool:
    """A value the adapter must report (the traffic-only NaN of a quiet window is no traffic;
    a NaN arrival dispersion is not measured: its bins can miss the newest seconds; a figure
    a short window does not ask for is never read)."""
    if figure not in asked or (figure == "arrival_dispersion" and math.isnan(value)):
        return False
    if not math.isfinite(value):
        return not (figure in TRAFFIC_FIGURES and not traffic)
    return value < 0 or value > _bound(figure)


def _snapshot(rec: Recording) -> MetricsSnapshot:
    return query_snapshot(
        FakePrometheus(rec),
        rec.namespace,
        rec.name,
        window=rec.window,
        now=rec.now,
        expected_pods=2,
        fleet=FLEET,
        stale_after=30,
    )


@st.composite
def answers(draw: Any) -> tuple[Recording, list[tuple[str, float, str]]]:
    """A recording with some figures replaced, and (figure, value, label) per replacement."""
    rec = draw(st.sampled_from([TRAFFIC, IDLE]))
    injected: list[tuple[str, float, str]] = []
    for figure in draw(st.lists(st.sampled_from(SINGLES), max_size=4, unique=True)):
        value = draw(VALUES)
        rec = rec.with_values(figure, {"": _show(value)})
        injected.append((figure, value, figure))
    for figure in draw(st.lists(st.sampled_from(POD_GAUGES), max_size=2, unique=True)):
        value = draw(VALUES)
        rec = rec.with_values(figure, {POD_A: "0", POD_B: _show(value)})
        injected.append((figure, value, f"{figure.removeprefix('pod_')} of {POD_B}"))
    if draw(st.booleans()):
        value = draw(VALUES)
        rec = rec.with_values(
            "rejection_rate_by_reason", {REASONS[0]: _show(value), REASONS[1]: "0"}, "reason"
        )
        injected.append(("rejection_rate_by_reason", value, f"rejection rate {REASONS[0]}"))
    return rec, injected


@settings(derandomize=True, max_examples=PROPERTY_EXAMPLES, deadline=None)
@given(answers())
def test_decide_never_acts_on_a_bad_figure_and_names_it(
    generated: tuple[Recording, list[tuple[str, float, str]]],
) -> None:
    rec, injected = generated
    snap = _snapshot(rec)
    decision = decide(spec(), snap, state(), rec.now)
    admitted = snap.admitted_rate
    traffic = admitted is not None and admitted > 0
    asked = build_snapshot_queries(rec.namespace, rec.name, rec.window)
    bad = [label for figure, value, label in injected if _bad(figure, value, traffic, asked)]
    event(f"bad figure injected: {bool(bad)}; decision {decision.action.kind} {decision.reason}")
    if bad:
        assert snap.quality == "invalid", (injected, snap.problem)
        assert decision.action.kind == "Hold"
        assert decision.reason == "HoldMetricsInvalid"
        for label in bad:
            assert label in decision.message, (label, decision.message)
    if decision.action.kind != "Hold":
        assert snap.usable
        numbers = [*snap.figures().values(), *snap.rejection_rate_by_reason.values()]
        assert all(0 <= n <= 1e7 for n in numbers if n is not None), snap


SNAPSHOT_FIGURES = [
    f.name for f in fields(MetricsSnapshot) if f.name in PLAUSIBLE_MAX and f.name != "sample_age"
]
BASE = MetricsSnapshot(observed_at=TRAFFIC.now, window_seconds=120.0, quality="ok")


@settings(derandomize=True, max_examples=PROPERTY_EXAMPLES, deadline=None)
@given(st.sampled_from(SNAPSHOT_FIGURES), VALUES)
def test_a_snapshot_refuses_a_figure_no_engine_produces(name: str, value: float) -> None:
    plausible = math.isfinite(value) and 0 <= value <= PLAUSIBLE_MAX[name]
    if name == "window_seconds":
        plausible = plausible and value > 0
    if plausible:
        assert getattr(replace(BASE, **{name: value}), name) == value
    else:
        with pytest.raises(ImplausibleFigureError, match=f"MetricsSnapshot.{name}"):
            replace(BASE, **{name: value})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"kv_usage": 1.5}, "PodFigures.kv_usage is 1.5, above 1"),
        ({"running": -1.0}, "PodFigures.running is negative (-1)"),
        ({"sample_age": math.nan}, "PodFigures.sample_age is nan"),
    ],
)
def test_pod_figures_refuse_bad_figures(changes: dict[str, float], message: str) -> None:
    with pytest.raises(ImplausibleFigureError, match=re.escape(message)):
        PodFigures(pod="p", **changes)


def test_an_absurd_request_rate_holds_instead_of_retuning() -> None:
    rec = TRAFFIC.with_values("admitted_rate", {"": "1e9"})
    decision = decide(spec(), _snapshot(rec), state(), rec.now)
    assert (decision.action.kind, decision.reason) == ("Hold", "HoldMetricsInvalid")
    assert "admitted_rate is 1e+09, above 1e+06" in decision.message


def test_latency_histograms_all_absent_under_traffic_is_invalid() -> None:
    rec = TRAFFIC
    for figure in ("ttft_p95", "itl_p95", "queue_time_p95", "e2e_p95"):
        rec = rec.with_result(figure, [])
    snap = _snapshot(rec)
    assert snap.quality == "invalid"
    assert snap.problem == (
        "Prometheus gave unusable figures for team-a/chat: no latency histogram answers "
        "(ttft_p95, itl_p95, queue_time_p95, e2e_p95) while 0.102 requests/s finished."
    )
    # Quiet, the same absence is no traffic.
    quiet = IDLE
    for figure in ("ttft_p95", "itl_p95", "queue_time_p95", "e2e_p95"):
        quiet = quiet.with_result(figure, [])
    assert _snapshot(quiet).quality == "ok"
