"""Client failures become quality "error" with one clear sentence, and are reported once."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from prometheus_api_client.exceptions import PrometheusApiClientException

from tests.unit.metrics.fake import FakePrometheus, load
from vllm_operator.metrics.prometheus import FailureKind, QueryFailure, query_snapshot
from vllm_operator.metrics.queries import Figure
from vllm_operator.tuning.model import MetricsSnapshot

TRAFFIC = load("traffic-two-pods.json")
# What requests raises for a refused connection, URL and all (urllib3 2.x wording).
REFUSED = (
    "HTTPConnectionPool(host='127.0.0.1', port=9090): Max retries exceeded with url:"
    " /api/v1/query?query=max+by+%28pod%29 (Caused by NewConnectionError('<urllib3.connection."
    "HTTPConnection object at 0x7f>: Failed to establish a new connection: [Errno 111]"
    " Connection refused'))"
)


def run(fake: Any) -> tuple[MetricsSnapshot, list[QueryFailure]]:
    failures: list[QueryFailure] = []
    snap = query_snapshot(
        fake, "team-a", "chat", window=120, now=TRAFFIC.now, expected_pods=2, fleet=None,
        stale_after=30, on_error=failures.append,
    )  # fmt: skip
    return snap, failures


@pytest.mark.parametrize(
    ("exc", "kind", "problem"),
    [
        (
            requests.ConnectionError(REFUSED),
            "connection",
            "Prometheus cannot be reached (query for ttft_p95): [Errno 111] Connection refused.",
        ),
        (
            requests.ReadTimeout(
                "HTTPConnectionPool(host='prom', port=9090): Read timed out. (read timeout=10.0)"
            ),
            "timeout",
            "Prometheus did not answer in time (query for ttft_p95): HTTPConnectionPool("
            "host='prom', port=9090): Read timed out. (read timeout=10.0).",
        ),
        (
            PrometheusApiClientException("HTTP Status Code 502 (b'bad gateway')"),
            "http",
            "Prometheus refused the query (query for ttft_p95): HTTP Status Code 502"
            " (b'bad gateway').",
        ),
        (
            requests.exceptions.JSONDecodeError("Expecting value", "<html>", 0),
            "response",
            "Prometheus gave an answer that is not an instant vector (query for ttft_p95):"
            " Expecting value: line 1 column 1 (char 0).",
        ),
        (
            KeyError("data"),
            "response",
            "Prometheus gave an answer that is not an instant vector (query for ttft_p95): 'data'.",
        ),
        (RuntimeError(), "unexpected", "Prometheus failed (query for ttft_p95): RuntimeError."),
    ],
    ids=["refused", "timeout", "http-502", "bad-json", "no-data", "other"],
)
def test_client_exceptions(exc: Exception, kind: FailureKind, problem: str) -> None:
    fake = FakePrometheus(TRAFFIC, raises={"ttft_p95": exc})
    snap, failures = run(fake)
    assert snap == MetricsSnapshot(
        observed_at=TRAFFIC.now, window_seconds=120, quality="error", problem=problem,
        pods_expected=2,
    )  # fmt: skip
    query = TRAFFIC.queries()["ttft_p95"]
    assert failures == [QueryFailure("ttft_p95", query, kind, problem.split("): ", 1)[1][:-1])]
    # The snapshot ends at the first failure: a down Prometheus costs one timeout, not sixteen.
    assert fake.calls[-1][0] == query
    assert len(fake.calls) == list(TRAFFIC.queries()).index("ttft_p95") + 1


@pytest.mark.parametrize(
    ("figure", "result", "message"),
    [
        ("pod_up", {"resultType": "vector"}, "expected an instant vector (a list), got dict"),
        (
            "pod_up",
            [1795952488.4, "1"],
            "expected an instant vector, got a scalar [1795952488.4, '1']",
        ),
        ("pod_up", ["x"], "expected a sample object, got str"),
        ("pod_up", [{"metric": {}, "value": [1.0, "lots"]}], "sample value 'lots' is not a number"),
        ("pod_up", [{"metric": {"pod": 1}, "value": [1.0, "1"]}], "sample without a label map"),
        ("pod_up", [{"metric": {}, "value": [1.0, 1]}], 'sample without a [time, "value"] pair'),
        (
            "running",
            [
                {"metric": {"pod": "a"}, "value": [1.0, "1"]},
                {"metric": {"pod": "b"}, "value": [1.0, "2"]},
            ],
            "expected at most one series, got 2",
        ),
    ],
)
def test_answers_that_are_not_what_the_query_asks_for(
    figure: Figure, result: Any, message: str
) -> None:
    snap, failures = run(FakePrometheus(TRAFFIC.with_result(figure, result)))
    assert snap.quality == "error"
    assert snap.problem is not None
    assert snap.problem.startswith(
        f"Prometheus gave an answer that is not an instant vector (query for {figure}): {message}"
    )
    assert [(f.figure, f.kind) for f in failures] == [(figure, "response")]


def test_long_messages_are_cut() -> None:
    fake = FakePrometheus(TRAFFIC, raises={"pod_up": PrometheusApiClientException("x" * 500)})
    snap, failures = run(fake)
    assert failures[0].message == "x" * 197 + "..."
    # Already ends in a full stop: none added.
    assert snap.problem == f"Prometheus refused the query (query for pod_up): {'x' * 197}..."


def test_without_a_callback_errors_are_still_verdicts() -> None:
    fake = FakePrometheus(TRAFFIC, raises={"pod_up": requests.ConnectionError(REFUSED)})
    snap = query_snapshot(
        fake, "team-a", "chat", window=120, now=TRAFFIC.now, expected_pods=2, fleet=None,
        stale_after=30,
    )  # fmt: skip
    assert snap.quality == "error"
