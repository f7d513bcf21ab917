"""Reading a VLLMService back from the real API server, as kubectl shows it."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.support.harness import Harness
from tests.support.kube import Cluster
from tests.support.wait import wait_until
from vllm_operator.api.durations import parse_kube_time


def chat_service(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    """A one-H100 chat VLLMService with small budgets (the e2e tiers' default); `spec` replaces
    top-level keys."""
    base: dict[str, Any] = {
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "servedModelName": "chat",
        "gpu": {"type": "H100-80GB"},
        "replicas": 1,
        "budgets": {"queue": {"maxRequests": 4}, "running": {"maxSeqs": 4}},
        "slo": {"ttftP95": "2s", "itlP95": "100ms", "maxRejectionRatio": 0.05},
    }
    return {
        "apiVersion": "serving.vllmop.io/v1alpha1",
        "kind": "VLLMService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {**base, **spec},
    }


def get(cluster: Cluster, kind: str, namespace: str, name: str) -> dict[str, Any]:
    out = cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json").stdout
    obj: dict[str, Any] = json.loads(out)
    return obj


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    conds = obj.get("status", {}).get("conditions") or []
    return next((c for c in conds if c["type"] == type_), {})


def assert_spec_untouched(cluster: Cluster, ns: str, name: str) -> None:
    """GitOps owns spec: no operator field manager may hold a spec field."""
    out = cluster.kubectl(
        "get", "vllmservice", name, "-n", ns, "-o", "json", "--show-managed-fields"
    ).stdout
    entries = json.loads(out)["metadata"]["managedFields"]
    assert any(e["manager"] == "vllm-operator-status" for e in entries)  # the check can see us
    for entry in entries:
        if entry["manager"].startswith(("vllm-operator", "kopf")):
            assert "f:spec" not in (entry.get("fieldsV1") or {}), entry


def wide_row_matches_status(cluster: Cluster, ns: str, name: str) -> bool:
    """The printer columns of `kubectl get vllmsvc -o wide` say what status says."""
    (row,) = cluster.table("vllmsvc", name, "-n", ns, "-o", "wide")
    s = get(cluster, "vllmservice", ns, name)["status"]
    decisions = s["tuning"]["lastDecisions"]
    return (
        (row["GPU"], row["DESIRED"], row["READY"]) == ("H100-80GB", str(s["replicas"]), "True")
        and (row["MODE"], row["REASON"]) == (s["tuning"]["mode"], decisions[-1]["reason"])
        and float(row["503-RATIO"]) == pytest.approx(s["metrics"]["rejectionRatio"])
        and float(row["TTFT-P95"]) == pytest.approx(s["metrics"]["ttftP95Seconds"])
    )


def tuning_status(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    """The VLLMService's status.tuning; {} before the tuner's first pass wrote it."""
    tuning: dict[str, Any] = (get(cluster, "vllmservice", ns, name).get("status") or {}).get(
        "tuning", {}
    )
    return tuning


def decisions(cluster: Cluster, ns: str, name: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = tuning_status(cluster, ns, name).get("lastDecisions", [])
    return out


def flag(args: list[str], name: str) -> str | None:
    """The value after `name` in a container's args, if the flag is there."""
    return args[args.index(name) + 1] if name in args else None


def epoch_seconds(stamp: str) -> float:
    """A status timestamp (RFC 3339, Z) as seconds since the epoch."""
    parsed = parse_kube_time(stamp)
    assert parsed is not None, f"not an API timestamp: {stamp!r}"
    return parsed.timestamp()


def start(cluster: Cluster, harness: Harness, obj: dict[str, Any]) -> str:
    """Apply, then wait until every replica has a ready twin that Prometheus scrapes; the URL of
    the service's loopback balancer."""
    ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj))
    wait_until(
        lambda: (
            condition(get(cluster, "vllmservice", ns, name), "TuningActive").get("status") == "True"
        ),
        timeout=90,
        what=f"{name}: the tuner to see usable metrics",
    )
    url: str = harness.service(ns, name)["url"]
    return url
