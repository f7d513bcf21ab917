"""The operator's own Prometheus metrics (prefix vllm_operator_), served by `run --metrics-port`,
and its log."""

from __future__ import annotations

import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, MetricsHandler

REGISTRY = CollectorRegistry(auto_describe=True)

DECISIONS = Counter(
    "vllm_operator_decisions",
    "Tuning decisions recorded in status, by kind (ScaleReplicas, SetBudget, Rollback, Hold)"
    " and reason.",
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
LOOKS = Counter(
    "vllm_operator_tuning_looks",
    "Passes due for a look for a budget move (rule 9b), by outcome: made, or deferred for want "
    "of CPU in the operator's look budget (config tuningLookCpuPerMinute).",
    ["outcome"],
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


# prometheus_client's own server starts a thread per connection and never times one out, so a
# client that opens connections and sends nothing exhausts the process. This one serves at most
# MAX_CONNECTIONS at once (the rest are closed at once) and drops a connection idle for
# CONNECTION_TIMEOUT_S; a scrape needs one short connection.
MAX_CONNECTIONS: Final = 8
CONNECTION_TIMEOUT_S: Final = 10.0


class BoundedHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def build_metrics_server(port: int, addr: str) -> BoundedHTTPServer:
    """The /metrics server, bound but not yet serving (port 0 picks a free port)."""
    base = MetricsHandler.factory(REGISTRY)
    handler = type("TimedMetricsHandler", (base,), {"timeout": CONNECTION_TIMEOUT_S})
    return BoundedHTTPServer((addr, port), handler)


def serve_metrics(port: int, addr: str) -> BoundedHTTPServer:
    """Serve /metrics on addr:port from a daemon thread."""
    server = build_metrics_server(port, addr)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


LOG_FORMAT: Final = "%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str) -> None:
    """The operator's lines at `level` on stderr, UTC-stamped; kopf's own from warning unless
    `level` is debug (kopf logs every handler run at info: a line per event at 1,000 services).
    Touches the process's logging configuration."""
    handler = logging.StreamHandler()
    formatter = logging.Formatter(LOG_FORMAT, datefmt="%Y-%m-%dT%H:%M:%S")
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if level == "debug" else logging.WARNING)
    logging.getLogger("vllm_operator").setLevel(level.upper())
