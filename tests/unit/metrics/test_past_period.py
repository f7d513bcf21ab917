"""The look one traffic period back (metrics/past_period.py, prometheus.query_past_period): one
range query, its span, and what of its answer is history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests

from tests.unit.metrics.fake import FakePrometheus, load
from vllm_operator.metrics.past_period import (
    PAST_AFTER,
    PAST_BEFORE,
    build_request_rate,
    parse_past_period,
    past_span,
)
from vllm_operator.metrics.prometheus import QueryFailure, query_past_period
from vllm_operator.metrics.vectors import ResponseShapeError

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
DAY = 86400.0
SEL = '{namespace="team-a",serving_vllmop_io_vllmservice="chat"}'


def matrix(*pairs: tuple[float, str]) -> list[dict[str, Any]]:
    return [{"metric": {}, "values": [[t, v] for t, v in pairs]}]


def test_the_query_adds_refusals_to_what_finished_and_is_absent_without_either() -> None:
    assert build_request_rate(SEL, "120s") == (
        f"sum(rate(vllm:request_success_total{SEL}[120s]))"
        f" + (sum(rate(vllm:admission_rejections_total{SEL}[120s])) or vector(0))"
    )


def test_the_span_covers_the_recent_passes_and_the_longest_lookahead_one_period_ago() -> None:
    start, end = past_span(NOW, DAY)
    assert NOW - start == timedelta(seconds=DAY + PAST_BEFORE)
    assert NOW - end == timedelta(seconds=DAY - PAST_AFTER)


def test_samples_that_are_no_rate_or_in_the_future_are_left_out() -> None:
    t = NOW.timestamp() - DAY
    answer = matrix(
        (t - 60, "1.5"), (t, "NaN"), (t + 60, "-2"), (t + 120, "+Inf"), (t + 180, "3"),
        (NOW.timestamp(), "4"), (NOW.timestamp() + 60, "5"),
    )  # fmt: skip
    past = parse_past_period(answer, DAY, NOW)
    assert [(s.at.timestamp() - t, s.rate) for s in past.rates] == [(-60, 1.5), (180, 3.0)]
    assert past.period == DAY
    assert parse_past_period([], DAY, NOW).rates == ()  # nothing kept that far back


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"resultType": "matrix"}, "expected a range vector"),
        (matrix((1.0, "1")) * 2, "at most one series"),
        ([{"metric": {}}], "series without values"),
        ([{"metric": {}, "values": [[1.0, 2.0]]}], "pair"),
        ([{"metric": {}, "values": [["x", "2"]]}], "not a time and a number"),
        (matrix((2.0, "1"), (1.0, "1")), "increasing time order"),
    ],
)
def test_an_answer_that_is_no_range_vector_is_refused(answer: Any, message: str) -> None:
    with pytest.raises(ResponseShapeError, match=message):
        parse_past_period(answer, DAY, NOW)


def test_the_client_is_asked_one_range_over_the_span_at_the_step() -> None:
    t = NOW.timestamp() - DAY
    fake = FakePrometheus(load("traffic-two-pods.json"), past=matrix((t, "2.5")))
    past = query_past_period(fake, "team-a", "chat", window=120.0, now=NOW, period=DAY)
    assert past is not None and [s.rate for s in past.rates] == [2.5]
    [(query, start, end, step)] = fake.range_calls
    assert query == build_request_rate(SEL, "120s") and step == "60s"
    assert (start, end) == past_span(NOW, DAY)


@pytest.mark.parametrize(
    ("raised", "kind"),
    [
        (requests.ConnectionError("[Errno 111] Connection refused"), "connection"),
        (requests.Timeout("read timed out"), "timeout"),
    ],
)
def test_a_failed_look_back_is_reported_and_costs_only_the_shape(
    raised: Exception, kind: str
) -> None:
    failures: list[QueryFailure] = []
    fake = FakePrometheus(load("traffic-two-pods.json"), past_raises=raised)
    past = query_past_period(
        fake, "team-a", "chat", window=120.0, now=NOW, period=DAY, on_error=failures.append
    )
    assert past is None
    assert [(f.figure, f.kind) for f in failures] == [("past_period", kind)]


def test_a_malformed_answer_is_a_response_failure() -> None:
    failures: list[QueryFailure] = []
    fake = FakePrometheus(load("traffic-two-pods.json"), past={"not": "a list"})
    assert query_past_period(fake, "team-a", "chat", window=120.0, now=NOW, period=DAY,
                             on_error=failures.append) is None  # fmt: skip
    assert [f.kind for f in failures] == ["response"]
