"""The PromQL `plan --from-prometheus` asks, and how its answers become a workload."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from vllm_operator.metrics.workload import (
    WorkloadQueryError,
    build_workload_queries,
    query_workload,
)

SEL = '{namespace="llm",serving_vllmop_io_vllmservice="chat"}'
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def test_workload_queries() -> None:
    assert build_workload_queries("llm", "chat", 3600) == {
        "rate": f"sum(rate(vllm:request_success_total{SEL}[3600s]))"
        f" + (sum(rate(vllm:admission_rejections_total{SEL}[3600s])) or vector(0))",
        "prompt": f"sum by (le) (increase(vllm:request_prompt_tokens_bucket{SEL}[3600s]))",
        "output": f"sum by (le) (increase(vllm:request_generation_tokens_bucket{SEL}[3600s]))",
        "prompt_sum": f"sum(increase(vllm:request_prompt_tokens_sum{SEL}[3600s]))",
        "output_sum": f"sum(increase(vllm:request_generation_tokens_sum{SEL}[3600s]))",
    }


class Answers:
    """A client that answers each query by its key, as PrometheusConnect.custom_query does; a
    key not given answers an empty vector (no such series)."""

    url = "http://prom:9090"

    def __init__(self, by_key: dict[str, Any]) -> None:
        queries = build_workload_queries("llm", "chat", 60)
        self.by_query = {queries[k]: v for k, v in by_key.items()}

    def custom_query(self, query: str, params: dict[str, Any] | None = None) -> Any:
        answer = self.by_query.get(query, [])
        if isinstance(answer, Exception):
            raise answer
        return answer


def vector(*samples: tuple[dict[str, str], str]) -> list[dict[str, Any]]:
    return [{"metric": labels, "value": [0, value]} for labels, value in samples]


BUCKETS = vector(({"le": "10"}, "3"), ({"le": "100"}, "9"), ({"le": "+Inf"}, "10"))


def test_answers_become_rate_and_buckets() -> None:
    client = Answers({"rate": vector(({}, "2.5")), "prompt": BUCKETS, "output": BUCKETS})
    seen = query_workload(client, "llm", "chat", window=60, now=NOW)
    assert seen.rate == 2.5
    assert seen.prompt_buckets == ((10.0, 3.0), (100.0, 9.0), (float("inf"), 10.0))
    assert (seen.prompt_sum, seen.output_sum) == (None, None)  # no _sum series: unknown


def test_the_histograms_sums_give_their_exact_means() -> None:
    sums = {"prompt_sum": vector(({}, "420")), "output_sum": vector(({}, "95"))}
    client = Answers({"rate": vector(({}, "2.5")), "prompt": BUCKETS, "output": BUCKETS, **sums})
    seen = query_workload(client, "llm", "chat", window=60, now=NOW)
    assert (seen.prompt_sum, seen.output_sum) == (420.0, 95.0)


@pytest.mark.parametrize(
    ("answers", "says"),
    [
        ({"rate": vector(({}, "0")), "prompt": BUCKETS, "output": BUCKETS}, "no requests to"),
        ({"rate": [], "prompt": BUCKETS, "output": BUCKETS}, "no requests to"),
        ({"rate": vector(({}, "1")), "prompt": [], "output": BUCKETS}, "has no vllm:request"),
        (
            {"rate": ConnectionError("[Errno 111] Connection refused"), "prompt": [], "output": []},
            "http://prom:9090: the query for rate failed: [Errno 111] Connection refused",
        ),
    ],
)
def test_what_cannot_be_planned_for_is_one_line(answers: dict[str, Any], says: str) -> None:
    with pytest.raises(WorkloadQueryError, match=says.replace("[", r"\[")):
        query_workload(Answers(answers), "llm", "chat", window=60, now=NOW)
