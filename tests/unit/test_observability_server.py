"""The operator's /metrics server: serves scrapes, and a flood of idle connections cannot
exhaust it (at most MAX_CONNECTIONS at once, the rest closed at once)."""

from __future__ import annotations

import socket
import threading
import urllib.request
from collections.abc import Iterator

import pytest

from tests.support.wait import wait_until
from vllm_operator.observability import (
    CONNECTION_TIMEOUT_S,
    MAX_CONNECTIONS,
    BoundedHTTPServer,
    build_metrics_server,
)


@pytest.fixture
def server() -> Iterator[BoundedHTTPServer]:
    srv = build_metrics_server(0, "127.0.0.1")
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _scrape(srv: BoundedHTTPServer) -> str:
    host, port = srv.server_address[:2]
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as answer:
        return str(answer.read().decode())


def test_metrics_are_served_on_the_configured_address(server: BoundedHTTPServer) -> None:
    assert server.server_address[0] == "127.0.0.1"
    assert "vllm_operator_reconcile_duration_seconds" in _scrape(server)
    assert CONNECTION_TIMEOUT_S <= 30  # a slow client is dropped, not waited on for ever


def test_idle_connections_beyond_the_cap_are_closed_and_scrapes_recover(
    server: BoundedHTTPServer,
) -> None:
    address = server.server_address[:2]
    idle = [socket.create_connection(address, timeout=5) for _ in range(MAX_CONNECTIONS)]
    try:
        # Each idle connection holds a slot once accepted; then one more is closed at once.
        def refused() -> bool:
            extra = socket.create_connection(address, timeout=5)
            with extra:
                return extra.recv(1) == b""

        wait_until(refused, timeout=10, what="a connection past the cap to be closed")
    finally:
        for conn in idle:
            conn.close()
    assert "vllm_operator_" in wait_until(lambda: _scrape(server), timeout=10, what="a scrape")
