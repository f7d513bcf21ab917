"""Operator + kwok pods + twins + real Prometheus: the loop's plumbing end to end.

The harness starts one twin per Running pod with the pod's own rendered args; Prometheus scrapes
each twin labelled as a PodMonitor would; traffic goes through the loopback balancer.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
import urllib.request
from typing import Any

import pytest
import yaml
from tests.support.harness import Harness
from tests.support.kube import ROOT, Cluster
from tests.support.operator import OperatorProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.e2e


def prom(cluster: Cluster, expr: str) -> list[dict[str, Any]]:
    q = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{cluster.prometheus_url}/api/v1/query?{q}", timeout=10) as r:
        body = json.load(r)
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def test_every_running_pod_gets_a_twin_with_its_own_args(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str, harness: Harness
) -> None:
    obj = yaml.safe_load((ROOT / "examples" / "three-layer-budgets.yaml").read_text())
    obj["metadata"]["namespace"] = namespace
    name = obj["metadata"]["name"]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj))
    replicas = obj["spec"]["replicas"]

    twins = wait_until(
        lambda: (t := harness.ready_twins(namespace, name)) and len(t) == replicas and t,
        timeout=90,
        what=f"{replicas} ready twins for {name}",
    )
    dep = json.loads(cluster.kubectl("get", "deploy", name, "-n", namespace, "-o", "json").stdout)
    rendered = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    i = rendered.index("--port")
    for twin in twins.values():
        assert twin["args"][: len(rendered) - 2] == rendered[:i] + rendered[i + 2 :]

    # Prometheus scrapes each twin with the VLLMService's label (the label contract).
    sel = f'namespace="{namespace}",serving_vllmop_io_vllmservice="{name}"'
    up = wait_until(
        lambda: (r := prom(cluster, f"up{{{sel}}} == 1")) and len(r) == replicas and r,
        timeout=60,
        what="Prometheus to scrape every twin",
    )
    assert {s["metric"]["pod"] for s in up} == set(twins)

    # Load through the balancer reaches the twins and shows up in Prometheus.
    url = harness.service(namespace, name)["url"]

    async def burst() -> list[int]:
        import aiohttp

        async with aiohttp.ClientSession() as s:

            async def one() -> int:
                async with s.post(
                    f"{url}/v1/completions",
                    json={"model": "chat", "prompt": "a " * 100, "max_tokens": 8},
                ) as resp:
                    await resp.read()
                    return resp.status

            return list(await asyncio.gather(*(one() for _ in range(12))))

    codes = asyncio.run(burst())
    assert codes.count(200) == 12, codes
    total = wait_until(
        lambda: (
            (r := prom(cluster, f"sum(vllm:request_success_total{{{sel}}})"))
            and float(r[0]["value"][1]) >= 12
            and r
        ),
        timeout=30,
        what="Prometheus to see the 12 finished requests",
    )
    assert float(total[0]["value"][1]) == 12
