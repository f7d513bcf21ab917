"""The plan holds on the cluster: `vllm-operator plan`'s VLLMService, applied to the local
control plane, served by the harness's twins, under the workload it was planned for.

The load generator replays the planned workload (Poisson arrivals, fixed lengths, streamed)
through the service's loopback balancer; the measured share of requests within the SLO must be
within 5 points of the plan's prediction, and the 503 share no higher than the plan's.
"""

from __future__ import annotations

import asyncio
import json
import random

import pytest
import yaml
from tests.support.harness import Harness
from tests.support.kube import Cluster
from tests.support.operator import OperatorProcess
from tests.support.wait import wait_until

from vllm_operator.cli import main
from vllm_twin.loadgen.report import Slo, summarize_outcomes
from vllm_twin.loadgen.runner import LoadSpec, run_load
from vllm_twin.loadgen.trace import bounded, poisson

pytestmark = pytest.mark.e2e

RATE, PROMPT, OUTPUT, SECONDS, TTFT = 4.0, 256, 64, 60.0, 1.0
MODEL = "Qwen/Qwen2.5-7B-Instruct"


def test_the_recommended_service_meets_its_predicted_slo(
    cluster: Cluster,
    operator_process: OperatorProcess,
    namespace: str,
    harness: Harness,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [
        "plan", "--gpu", "H100-80GB", "--model", MODEL, "--poisson", str(RATE),
        "--prompt-len", f"fixed:{PROMPT}", "--output-len", f"fixed:{OUTPUT}",
        "--slo-ttft", f"{TTFT * 1000:.0f}ms", "--service", f"{namespace}/planned", "-o", "json",
    ]  # fmt: skip
    assert main(argv) == 0
    plan = json.loads(capsys.readouterr().out)
    manifest, predicted = plan["recommendation"]["vllmService"], plan["recommendation"]["predicted"]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
    replicas = manifest["spec"]["replicas"]
    wait_until(
        lambda: len(harness.ready_twins(namespace, "planned")) == replicas,
        timeout=120,
        what=f"{replicas} ready twins for the planned service",
    )
    url = harness.service(namespace, "planned")["url"]
    arrivals = bounded(poisson(RATE, [(PROMPT, OUTPUT)], random.Random(3)), SECONDS, None)
    outcomes = asyncio.run(run_load(LoadSpec((url,), tuple(arrivals), stream=True, model=MODEL)))
    report = summarize_outcomes(outcomes, Slo(ttft=TTFT, tpot=3600.0))  # the plan has no ITL SLO
    assert report.goodput_rps is not None
    measured = report.goodput_rps * report.span_s / report.requests
    print(  # the figures, for -s runs and the report
        f"plan holds: {replicas} replica(s), within the SLO {measured:.3f} measured vs "
        f"{predicted['slo_attainment']:.3f} predicted; 503 share {report.rejection_share:.3f} vs "
        f"{predicted['rejected_share']:.3f}; TTFT p95 {report.ttft.p95} vs "
        f"{predicted['ttft_p95_s']}"
    )
    assert abs(measured - predicted["slo_attainment"]) <= 0.05, (measured, predicted)
    assert report.rejection_share <= predicted["rejected_share"], (report, predicted)
