"""Prometheus -> MetricsSnapshot: the I/O edge of observation (the only user of the client).

Every query is an instant query evaluated at the caller's `now`, so the figures of one snapshot
describe the same moment. A failed query ends the snapshot with quality "error": the tuner's timer
is the retry loop, and no exception from the client reaches the caller.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from vllm_operator.config import OperatorConfig
from vllm_operator.metrics.past_period import (
    PAST_STEP,
    build_request_rate,
    parse_past_period,
    past_span,
)
from vllm_operator.metrics.queries import (
    SINGLE_SERIES,
    Figure,
    PodGroup,
    build_range,
    build_selector,
    build_snapshot_queries,
)
from vllm_operator.metrics.snapshot import build_snapshot
from vllm_operator.metrics.vectors import ResponseShapeError, Sample, parse_vector
from vllm_operator.tuning.model import FleetView, MetricsSnapshot, PastPeriod

if TYPE_CHECKING:
    from prometheus_api_client import PrometheusConnect

FailureKind = Literal["timeout", "connection", "http", "response", "unexpected"]
_MAX_DETAIL = 200


class PrometheusClientLike(Protocol):
    """What query_snapshot needs of prometheus_api_client.PrometheusConnect."""

    def custom_query(self, query: str, params: dict[str, Any] | None = None) -> Any: ...

    def custom_query_range(
        self, query: str, start_time: datetime, end_time: datetime, step: str
    ) -> Any: ...


PastFigure = Literal["past_period"]  # query_past_period's one query


@dataclass(frozen=True)
class QueryFailure:
    """One failed query, for the operator's own error counter (label: kind)."""

    figure: Figure | PastFigure
    query: str
    kind: FailureKind
    message: str


def build_prometheus(cfg: OperatorConfig) -> PrometheusConnect:
    """A client for cfg.prometheus_url with the configured timeout."""
    # Imported here: the package pulls in requests and friends, which only this edge needs.
    from prometheus_api_client import PrometheusConnect
    from urllib3.util.retry import Retry

    # One quick retry of a refused connection, none of slow answers or 5xx: the client's default
    # (3 retries, 1 s backoff) would hold a tuner pass for seconds per query. read=False re-raises
    # a read timeout as such; read=0 would turn it into a generic ConnectionError.
    retry = Retry(total=1, connect=1, read=False, status=0, other=0, backoff_factor=0)
    return PrometheusConnect(
        url=cfg.prometheus_url,
        timeout=cfg.prometheus_timeout_seconds,  # annotated int, handed to requests: float is fine
        retry=retry,
    )


def query_snapshot(
    prom: PrometheusClientLike,
    ns: str,
    name: str,
    *,
    window: float,
    now: datetime,
    expected_pods: int,
    fleet: FleetView | None,
    stale_after: float,
    on_error: Callable[[QueryFailure], None] | None = None,
    group: PodGroup = "all",
) -> MetricsSnapshot:
    """The VLLMService's figures over `window` seconds ending at `now` (timezone-aware).

    Raises ValueError only for a bad name, window or naive `now` (a caller's bug). A failing
    Prometheus gives quality "error" with the reason in `problem`, and `on_error` hears of it.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware: Prometheus evaluates at a Unix time")
    results: dict[Figure, list[Sample]] = {}
    for figure, query in build_snapshot_queries(ns, name, window, group).items():
        try:
            answer = prom.custom_query(query, params={"time": now.timestamp()})
            results[figure] = _check_cardinality(figure, parse_vector(answer))
        except Exception as exc:  # any client failure is a verdict, never a crash of the tuner
            failure = QueryFailure(figure, query, _kind(exc), _detail(exc))
            if on_error is not None:
                on_error(failure)
            return MetricsSnapshot(
                observed_at=now,
                window_seconds=window,
                quality="error",
                problem=_error_problem(prom, failure),
                pods_expected=expected_pods,
                fleet=fleet,
            )
    return build_snapshot(
        results,
        namespace=ns,
        name=name,
        window_seconds=window,
        now=now,
        expected_pods=expected_pods,
        fleet=fleet,
        stale_after=stale_after,
    )


def query_past_period(
    prom: PrometheusClientLike,
    ns: str,
    name: str,
    *,
    window: float,
    now: datetime,
    period: float,
    on_error: Callable[[QueryFailure], None] | None = None,
) -> PastPeriod | None:
    """The request rate around now - period (metrics/past_period.py), as Prometheus kept it;
    None when the query fails (`on_error` hears why): the forecast then goes on with the trend
    alone, and the rest of the pass is not held for a look back."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware: Prometheus evaluates at a Unix time")
    query = build_request_rate(build_selector(ns, name), build_range(window))
    try:
        start, end = past_span(now, period)  # a period beyond the calendar is a failure too
        answer = prom.custom_query_range(query, start, end, build_range(PAST_STEP))
        return parse_past_period(answer, period, now)
    except Exception as exc:  # a failed look back costs the shape, never the pass
        if on_error is not None:
            on_error(QueryFailure("past_period", query, _kind(exc), _detail(exc)))
        return None


def _check_cardinality(figure: Figure, samples: list[Sample]) -> list[Sample]:
    # A plain sum() has at most one series; more means the query was not ours or not honoured.
    if figure in SINGLE_SERIES and len(samples) > 1:
        raise ResponseShapeError(f"expected at most one series, got {len(samples)}")
    return samples


def _kind(exc: Exception) -> FailureKind:
    # By class name rather than isinstance: requests ships no type stubs here, and the names
    # (Timeout, ConnectionError) are shared with the builtins other clients raise.
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"Timeout", "TimeoutError"}:
        return "timeout"
    if "ConnectionError" in names:
        return "connection"
    if names & {"PrometheusApiClientException", "RetryError", "HTTPError"}:
        return "http"
    if isinstance(exc, ValueError | KeyError | TypeError):  # bad JSON, no data.result, shape
        return "response"
    return "unexpected"


def _detail(exc: Exception) -> str:
    text = " ".join((str(exc) or type(exc).__name__).split())
    # urllib3 buries the OS error (e.g. "[Errno 111] Connection refused") in a long message
    # that repeats the whole query URL; the OS error is what an operator needs.
    if errno := re.search(r"\[Errno -?\d+\] [^'\")]+", text):
        text = errno.group(0)
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 3] + "..."


def _error_problem(prom: PrometheusClientLike, failure: QueryFailure) -> str:
    where = getattr(prom, "url", None)
    who = f"Prometheus at {where}" if isinstance(where, str) else "Prometheus"
    what = {
        "timeout": "did not answer in time",
        "connection": "cannot be reached",
        "http": "refused the query",
        "response": "gave an answer that is not an instant vector",
        "unexpected": "failed",
    }[failure.kind]
    end = "" if failure.message.endswith(".") else "."
    return f"{who} {what} (query for {failure.figure}): {failure.message}{end}"
