"""Scaling before the miss on the real control plane: a ramp gets its pod before the first window
out of its SLO (tuning/forecast.py, tuning/capacity.py, docs/tuning.md "Forecast").

The reactive rules act once a window has missed the SLO (503s over the budget, a p95 over its
target). Here the engine model's capacity and the forecast see the ramp coming: the first
scale-up is taken while the service is inside its SLO, and the new pod serves before any
window of the clients' requests has missed it.

Time is compressed (tests/support/operator.py); every wait is on a condition.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from tests.support.harness import Harness
from tests.support.kube import Cluster
from tests.support.load import BackgroundLoad
from tests.support.operator import OperatorProcess
from tests.support.vllmsvc import chat_service, decisions, get, start
from tests.support.wait import wait_until

pytestmark = pytest.mark.e2e

NAME = "ramp"
TTFT_SLO = 2.0
REJECTION_BUDGET = 0.05
WINDOW = 10.0  # seconds of arrivals per judged window (the operator's metrics window is 20 s)
# The engine model gives one pod of this service (4 running, 200 + 100 tokens) 4.8 req/s within
# the SLO for Poisson arrivals; the even ramp (tests/support/load.py) crosses it at about half-way
# and ends needing three pods. The valve (16 waiting) is wide enough that the first miss, if
# any, is the ramp's.
RAMP = (0.5, 10.0, 120.0)
LENGTHS = {"prompt": 200, "output": 100}
BEFORE_THE_MISS = ("ScaleUpForecast", "ScaleUpNearCapacity")


def manifest(namespace: str) -> dict[str, Any]:
    return chat_service(
        namespace,
        NAME,
        budgets={"queue": {"maxRequests": 16}, "running": {"maxSeqs": 4}},
        autoscaling={"enabled": True, "minReplicas": 1, "maxReplicas": 3},
    )


def windows(outcomes: list[Any], until: float) -> list[tuple[float, float, float]]:
    """(start, TTFT p95, 503 share) of each WINDOW of arrivals that ended by `until`."""
    out = []
    start = 0.0
    while start + WINDOW <= until:
        sent = [o for o in outcomes if start <= o.start < start + WINDOW]
        if sent:
            # a request without a first token (refused, cut) counts as a TTFT over the SLO
            ttfts = sorted(o.ttft if o.ttft is not None else float("inf") for o in sent)
            p95 = ttfts[min(len(ttfts) - 1, int(0.95 * len(ttfts)))]
            refused = sum(1 for o in sent if o.status == 503) / len(sent)
            out.append((start, p95, refused))
        start += WINDOW
    return out


def test_a_ramp_gets_its_pod_before_the_first_window_out_of_slo(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str, harness: Harness
) -> None:
    url = start(cluster, harness, manifest(namespace))
    rate, ramp_to, duration = RAMP
    load = BackgroundLoad(
        url, rate=rate, ramp_to=ramp_to, duration=duration, stream=True, **LENGTHS
    )
    began = time.monotonic()
    load.start()
    try:
        wait_until(
            lambda: len(harness.ready_twins(namespace, NAME)) >= 2,
            timeout=duration + 30,
            what="a second ready twin during the ramp",
        )
        served = time.monotonic() - began  # the added pod takes traffic from here on
    finally:
        load.join(timeout=duration + 90)
    assert not load.thread.is_alive(), "the load generator did not finish"
    ups = [
        d
        for d in decisions(cluster, namespace, NAME)
        if d["action"] == "ScaleReplicas" and d["toValue"] > d["fromValue"]
    ]
    tuning = get(cluster, "vllmservice", namespace, NAME)["status"]["tuning"]
    seen = {k: tuning.get(k) for k in ("modelCapacity", "capacitySource", "forecast", "readyTime")}
    # a string, so pytest shows all of it: what the tuner saw and said, pass by pass
    told = json.dumps({"seen": seen, "decisions": tuning["lastDecisions"]}, indent=1)
    assert ups, told
    first = ups[0]
    # taken on what is coming, not on a miss, and while the service was inside its SLO
    assert first["reason"] in BEFORE_THE_MISS, told
    assert first["figures"].get("rejection_ratio", 0.0) <= REJECTION_BUDGET, first
    assert first["figures"].get("ttft_p95", 0.0) <= TTFT_SLO, first
    judged = windows(load.outcomes, until=served)
    assert judged, (served, len(load.outcomes))
    missed = [w for w in judged if w[1] > TTFT_SLO or w[2] > REJECTION_BUDGET]
    assert not missed, (served, missed, first)
