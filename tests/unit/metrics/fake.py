"""Recorded Prometheus answers (tests/fixtures/prometheus) and a client that replays them.

The fake stands in for PrometheusConnect at the I/O edge: it answers exactly the queries
build_snapshot_queries produces for the recording's VLLMService, as `data.result`, the way
PrometheusConnect.custom_query does, and raises what it is told to raise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vllm_operator.metrics.queries import Figure, build_snapshot_queries

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "prometheus"


@dataclass(frozen=True)
class Recording:
    namespace: str
    name: str
    window: float
    time: float
    responses: dict[str, Any]

    @property
    def now(self) -> datetime:
        return datetime.fromtimestamp(self.time, UTC)

    def queries(self) -> dict[Figure, str]:
        return build_snapshot_queries(self.namespace, self.name, self.window)

    def result(self, figure: Figure) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.responses[figure]["data"]["result"]
        return result

    def with_values(self, figure: Figure, values: dict[str, str], label: str = "pod") -> Recording:
        """The same answers, but `figure` answers one series per `values` entry: key = value of
        `label` ("" for a series without labels), value = the sample as Prometheus writes it."""
        result = [
            {"metric": {label: key} if key else {}, "value": [self.time, value]}
            for key, value in values.items()
        ]
        return self.with_result(figure, result)

    def with_result(self, figure: Figure, result: Any) -> Recording:
        answer = {"status": "success", "data": {"resultType": "vector", "result": result}}
        return Recording(
            self.namespace,
            self.name,
            self.window,
            self.time,
            {**self.responses, figure: answer},
        )


def load(file: str) -> Recording:
    doc = json.loads((FIXTURES / file).read_text())
    return Recording(
        doc["namespace"], doc["name"], doc["window_seconds"], doc["time"], doc["responses"]
    )


@dataclass
class FakePrometheus:
    recording: Recording
    raises: dict[Figure, Exception] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any] | None]] = field(default_factory=list)

    # metrics/past_period.py's range query: its `data.result` (no series: no history kept)
    past: Any = field(default_factory=list)
    past_raises: Exception | None = None
    range_calls: list[tuple[str, datetime, datetime, str]] = field(default_factory=list)

    def custom_query_range(
        self, query: str, start_time: datetime, end_time: datetime, step: str
    ) -> Any:
        self.range_calls.append((query, start_time, end_time, step))
        if self.past_raises is not None:
            raise self.past_raises
        return self.past

    def custom_query(self, query: str, params: dict[str, Any] | None = None) -> Any:
        self.calls.append((query, params))
        by_query = {q: f for f, q in self.recording.queries().items()}
        figure = by_query[query]  # an unknown query fails the snapshot, and so the test
        if figure in self.raises:
            raise self.raises[figure]
        response = self.recording.responses[figure]
        assert response["status"] == "success"
        return response["data"]["result"]
