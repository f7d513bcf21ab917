"""The operator's own Prometheus metrics (prefix vllm_operator_), served by `run --metrics-port`."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

DECISIONS = Counter(
    "vllm_operator_decisions",
    "Tuning decisions by kind (ScaleReplicas, SetBudget, Rollback, Hold) and reason.",
    ["kind", "reason", "applied"],
    registry=REGISTRY,
)
RECONCILE_SECONDS = Histogram(
    "vllm_operator_reconcile_duration_seconds",
    "Wall time of one reconcile or tuning pass.",
    ["handler"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
PROMETHEUS_ERRORS = Counter(
    "vllm_operator_prometheus_query_errors",
    "Tuning passes whose Prometheus queries failed or returned unusable data, by quality.",
    ["quality"],
    registry=REGISTRY,
)
AT_BOUND = Gauge(
    "vllm_operator_tuning_at_bound",
    "1 when the tuner wants to move a field past its declared bound (pinned), else 0.",
    ["namespace", "vllmservice", "field"],
    registry=REGISTRY,
)


def serve_metrics(port: int, addr: str = "0.0.0.0") -> None:
    from prometheus_client import start_http_server

    start_http_server(port, addr=addr, registry=REGISTRY)
