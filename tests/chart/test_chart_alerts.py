"""The chart's operator alerts on the real Prometheus, from the operator's own series.

The release's operator runs as the chart tier runs it (the installed pod's command line, config
and ServiceAccount), and the cluster's Prometheus scrapes its /metrics with the labels the
chart's ServiceMonitor gives the target (job = the metrics Service, namespace, pod). Each
alert's expression is the one the installed PrometheusRule holds. `for:` is not waited out:
an expression that returns the series is the alert pending.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.chart.cluster_helpers import (
    install_namespaced,
    installed_operator,
    load_example,
    release_name,
    unique_gpu_type,
)
from tests.chart.objects import create
from tests.chart.support import Helm
from tests.support.kube import Cluster
from tests.support.operator import free_port
from tests.support.prometheus import alert_expressions, assert_alert_fires, query, scrape_target
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration

# A tuning pass takes well under 10 ms against a refused connection: a 1 ms threshold is a p99
# the passes really exceed (the lowest bucket is 10 ms, so the quantile reads about 9.9 ms).
RULE_SETS = ("prometheusRule.reconcileSlow.thresholdSeconds=0.001",)


def test_the_operator_alerts_fire_on_its_own_series(
    cluster: Cluster,
    helm: Helm,
    current_crds: None,
    namespace: str,
    new_namespace: Any,
    tmp_path: Path,
) -> None:
    """Pointed at an address where no Prometheus answers, the operator's failing queries fire
    VLLMOperatorMetricsUnavailable and its tuning passes VLLMOperatorReconcileSlow; stopped, it
    fires VLLMOperatorDown, which stays quiet while it is scraped."""
    release, app_ns, gpu = release_name(), new_namespace(), unique_gpu_type()
    fullname = f"{release}-vllm-operator"
    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    install_namespaced(
        helm, release, namespace, [app_ns], gpu,
        "--set", f"config.prometheusUrl={nowhere}",
        "--set", "config.tuningIntervalSeconds=1",
        "--set", "metrics.serviceMonitor.enabled=true",
        "--set", "prometheusRule.enabled=true",
        *(a for s in RULE_SETS for a in ("--set-json", s)),
    )  # fmt: skip
    rule = json.loads(
        cluster.kubectl("get", "prometheusrule", fullname, "-n", namespace, "-o", "json").stdout
    )
    installed = {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert installed == alert_expressions(RULE_SETS, release, namespace)
    chart = {"release": (release, namespace), "sets": RULE_SETS}
    target = {"job": f"{fullname}-metrics", "namespace": namespace, "pod": f"{fullname}-0",
              "service": f"{fullname}-metrics", "endpoint": "metrics"}  # fmt: skip
    mine = {"namespace": namespace, "pod": f"{fullname}-0"}

    with installed_operator(cluster, namespace, release, tmp_path) as op:
        port = int(op.env["VLLM_OPERATOR_METRICS_PORT"])
        with scrape_target(cluster, port, target):
            up = f'up{{job="{fullname}-metrics", namespace="{namespace}"}} == 1'
            wait_until(lambda: query(cluster, up), timeout=30, what=f"Prometheus to scrape {up}")
            assert query(cluster, installed["VLLMOperatorDown"]) == []
            obj = load_example("minimal.yaml", app_ns)
            obj["spec"]["gpu"]["type"] = gpu
            obj["spec"]["autoscaling"] = {"enabled": True, "minReplicas": 1, "maxReplicas": 2}
            create(cluster, obj)
            assert_alert_fires(cluster, "VLLMOperatorMetricsUnavailable", mine, **chart)
            assert_alert_fires(cluster, "VLLMOperatorReconcileSlow", mine, **chart)
            op.stop()  # the pod is gone; its target is still listed, and every scrape fails
            assert_alert_fires(cluster, "VLLMOperatorDown", {}, **chart)
