"""`plan --from-prometheus`: the workload read from a real Prometheus scraping a real twin.

The twin (queue cap 2) answers bursts of 6-word prompts with 40 output tokens, so its
histograms put every prompt in vLLM's (5, 10] bucket and every output in (20, 50]; the arrival
rate counts the 503s too.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.component.test_metrics_live import (
    NAME,
    NS,
    POD,
    SEL,
    WINDOW,
    instant,
    running_prometheus,
    running_twin,
    send_bursts,
)
from tests.support.wait import wait_until
from vllm_operator.cli import main
from vllm_operator.config import OperatorConfig
from vllm_operator.metrics.prometheus import build_prometheus
from vllm_operator.metrics.workload import WorkloadQueryError, query_workload
from vllm_operator.planning.lengths import empirical_from_buckets


def test_the_workload_of_a_live_service_plans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with running_twin(tmp_path) as t, running_prometheus(tmp_path, {POD: t.port}) as p:
        prom = build_prometheus(OperatorConfig(prometheus_url=p.url, prometheus_timeout_seconds=5))
        wait_until(
            lambda: instant(prom, f"sum(vllm:request_success_total{SEL})") == 0,
            timeout=20,
            what="the first scrape of the twin",
        )
        codes = send_bursts(t.base, bursts=3, size=6)
        finished = codes.count(200)
        wait_until(
            lambda: instant(prom, f"sum(vllm:request_success_total{SEL})") == finished,
            timeout=20,
            what="Prometheus to hold the twin's final counters",
        )
        seen = query_workload(prom, NS, NAME, window=WINDOW, now=datetime.now(UTC))
        assert seen.rate * WINDOW == pytest.approx(len(codes), rel=0.5)
        prompt = empirical_from_buckets(seen.prompt_buckets, seen.prompt_sum)
        output = empirical_from_buckets(seen.output_buckets, seen.output_sum)
        assert prompt.exact_mean is not None and output.exact_mean is not None
        rng = random.Random(0)
        assert {5 <= prompt.sample(rng) <= 10 for _ in range(200)} == {True}
        assert {20 <= output.sample(rng) <= 50 for _ in range(200)} == {True}
        with pytest.raises(WorkloadQueryError, match="no requests to team-a/other"):
            query_workload(prom, NS, "other", window=WINDOW, now=datetime.now(UTC))

        argv = [
            "plan", "--gpu", "H100-80GB", "--model", "Qwen/Qwen2.5-7B-Instruct",
            "--from-prometheus", p.url, "--service", f"{NS}/{NAME}", "--window", "2m",
            "--slo-ttft", "500ms", "-o", "json",
        ]  # fmt: skip
        assert main(argv) == 0
        doc = json.loads(capsys.readouterr().out)
        manifest = doc["recommendation"]["vllmService"]
        assert manifest["metadata"] == {"name": NAME, "namespace": NS}
        assert doc["recommendation"]["predicted"]["meets_slo"] is True
