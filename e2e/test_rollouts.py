"""Rollouts on the real control plane: a retune under load cuts no request (docs/rollouts.md).

The tuner raises maxRequests under 503 pressure, which rolls the pod. With a free H100 the
rollout surges (a new pod before the old one goes), the old twin drains its requests as vLLM
0.33 does with --shutdown-timeout, and the load generator sees every request either complete
or refused with vLLM's own 503: none cut, none refused for want of a pod.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support.harness import Harness
from tests.support.kube import Cluster
from tests.support.load import BackgroundLoad
from tests.support.operator import OperatorProcess
from tests.support.vllmsvc import flag, get, start
from tests.support.wait import wait_until

from vllm_operator.render.rollout import SURGE

pytestmark = pytest.mark.e2e

BUSY = "The engine is currently busy and cannot accept new requests"


def args_of(dep: dict[str, Any]) -> list[str]:
    args: list[str] = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def test_a_retune_rollout_under_load_cuts_no_request(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str, harness: Harness
) -> None:
    # one replica, entry valve too tight for the load: the tuner opens it, which rolls the pod
    spec = {
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "gpu": {"type": "H100-80GB"},
        "replicas": 1,
        "budgets": {"queue": {"maxRequests": 2}, "running": {"maxSeqs": 4}},
        "slo": {"ttftP95": "2s", "itlP95": "100ms", "maxRejectionRatio": 0.05},
        "autotune": {
            "mode": "Auto",
            "bounds": {"maxRequests": {"min": 2, "max": 4}},
            "maxRestartsPerHour": 1,
        },
    }
    obj = {
        "apiVersion": "serving.vllmop.io/v1alpha1",
        "kind": "VLLMService",
        "metadata": {"name": "steady", "namespace": namespace},
        "spec": spec,
    }
    url = start(cluster, harness, obj)
    (first,) = harness.ready_twins(namespace, "steady")
    # answers of 600 tokens take seconds: some are still running when the old pod's preStop
    # sleep ends and SIGTERM comes, so the drain has work to finish
    load = BackgroundLoad(url, rate=14, duration=150, prompt=200, output=600, stream=True)
    load.start()

    def rolled() -> str | None:
        """The new pod's twin serves the raised flag and the old pod's twin is gone."""
        twins = harness.service(namespace, "steady").get("twins", {})
        ready = harness.ready_twins(namespace, "steady")
        new = [p for p, t in ready.items() if flag(t["args"], "--max-num-queued-reqs") == "4"]
        return new[0] if new and first not in twins else None

    try:
        wait_until(
            lambda: flag(args_of(get(cluster, "deployment", namespace, "steady")),
                         "--max-num-queued-reqs") == "4",
            timeout=100, what="the tuner to raise maxRequests",
        )  # fmt: skip
        dep = get(cluster, "deployment", namespace, "steady")
        assert dep["spec"]["strategy"] == SURGE, dep["spec"]["strategy"]
        wait_until(rolled, timeout=90, what="the rollout onto a twin with the raised flag")
    finally:
        load.join(timeout=200)
    assert not load.thread.is_alive(), "the load did not finish"

    outcomes = load.outcomes
    assert len(outcomes) > 1500, len(outcomes)
    cut = [o for o in outcomes if not o.ok and not (o.status == 503 and BUSY in (o.error or ""))]
    assert cut == [], f"{len(cut)} of {len(outcomes)} requests cut, first: {cut[:3]}"
    assert sum(o.ok for o in outcomes) > 20

    # the old twin held requests at SIGTERM and drained every one (twin log, docs/rollouts.md)
    log = Path(harness.log_path).parent / "twins" / f"{namespace}_{first}.log"
    text = log.read_text()
    assert "shutdown: mode=drain timeout=60s" in text, text[-2000:]
    assert "shutdown: 0 in-flight requests aborted" in text, text[-2000:]
    in_flight = int(text.split("requests in flight")[0].rsplit(",", 1)[1])
    assert in_flight > 0, text[-2000:]

    # one surge: the old ReplicaSet went to zero, the new one holds the only pod
    sets = json.loads(cluster.kubectl("get", "replicasets", "-n", namespace, "-o", "json").stdout)[
        "items"
    ]
    counts = sorted(int(rs["spec"]["replicas"]) for rs in sets)
    assert counts == [0, 1], counts
