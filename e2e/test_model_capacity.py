"""The engine model's capacity on the real control plane: a service that never missed its SLO
scales down to what the model says it needs (tuning/model_capacity.py, docs/tuning.md).

Time is compressed (tests/support/operator.py); every wait is on a condition.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.support.harness import Harness
from tests.support.kube import Cluster
from tests.support.load import BackgroundLoad
from tests.support.operator import OperatorProcess
from tests.support.vllmsvc import chat_service, decisions, get, start, tuning_status
from tests.support.wait import wait_until

pytestmark = pytest.mark.e2e

NAME = "model"


def manifest(namespace: str) -> dict[str, Any]:
    # 3 replicas for 1 req/s of short requests: quiet all along, so nothing is ever missed and
    # the only capacity is the model's. minReplicas starts at 3: an idle service steps down
    # without a capacity (no requests, nothing to size), and the load must be seen first.
    return chat_service(
        namespace,
        NAME,
        replicas=3,
        budgets={"queue": {"maxRequests": 16}, "running": {"maxSeqs": 8}},
        autoscaling={"enabled": True, "minReplicas": 3, "maxReplicas": 3},
    )


def model_capacity(cluster: Cluster, ns: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = tuning_status(cluster, ns, NAME).get("modelCapacity")
    return found


def replicas(cluster: Cluster, ns: str) -> int:
    return int(get(cluster, "deployment", ns, NAME)["spec"]["replicas"])


def scaled(cluster: Cluster, ns: str) -> dict[str, Any] | None:
    """status.tuning once it records a ScaleReplicas decision, else None."""
    tuning = tuning_status(cluster, ns, NAME)
    moves = [d for d in tuning.get("lastDecisions", []) if d["action"] == "ScaleReplicas"]
    return tuning if moves else None


def test_a_service_that_never_missed_scales_down_to_what_the_model_says_it_needs(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str, harness: Harness
) -> None:
    url = start(cluster, harness, manifest(namespace))
    load = BackgroundLoad(url, rate=1, duration=150, prompt=200, output=100).start()
    try:
        # the load is measured before a scale-down is allowed: then the first move has the
        # model's capacity to size with
        wait_until(
            lambda: model_capacity(cluster, namespace),
            timeout=60,
            what="status.tuning.modelCapacity for the load",
        )
        patch = {"spec": {"autoscaling": {"minReplicas": 1}}}
        cluster.kubectl(
            "patch", "vllmservice", NAME, "-n", namespace, "--type=merge", "-p", json.dumps(patch)
        )
        # the replicas are applied before the pass's status, so wait on the status that records
        # the move: it carries the capacity source that pass trusted
        try:
            tuning = wait_until(
                lambda: scaled(cluster, namespace),
                timeout=140,
                what="a scale-down on the model's capacity recorded in status.tuning",
            )
        except AssertionError as exc:  # say what the tuner did decide, and with what capacity
            seen = tuning_status(cluster, namespace, NAME)
            decided = [(d["action"], d["reason"]) for d in seen.get("lastDecisions", [])]
            raise AssertionError(
                f"{exc}; decisions {decided}, model capacity {seen.get('modelCapacity')}, "
                f"capacity source {seen.get('capacitySource')}"
            ) from exc
    finally:
        load.join(timeout=200)
    moves = [d for d in decisions(cluster, namespace, NAME) if d["action"] == "ScaleReplicas"]
    # one move, straight to what the model says (one 25% step would have been 3 -> 2)
    assert [(m["reason"], m["fromValue"], m["toValue"]) for m in moves] == [
        ("ScaleDownLowLoad", 3, 1)
    ], (moves, tuning.get("modelCapacity"))
    assert tuning.get("capacity") is None  # nothing observed: it never missed
    assert tuning["capacitySource"] == "model"
    model = tuning["modelCapacity"]
    assert model["perPod"] > 1.25  # 1 req/s stays under 80% of it on one pod
    assert "prompts" in model["workload"]
    assert replicas(cluster, namespace) == 1
