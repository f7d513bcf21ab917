"""Queries to the cluster's real Prometheus, and the shipped Grafana dashboard's panel queries.

The dashboard's expressions are run as Grafana would run them for one VLLMService: $namespace and
$vllmservice set to that service, $__rate_interval to RATE_INTERVAL (Grafana makes it at least
four scrape intervals; the e2e Prometheus scrapes every 2 s).
"""

from __future__ import annotations

import functools
import json
import math
import re
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.support.kube import ROOT, Cluster
from tests.support.wait import wait_until

DASHBOARD = ROOT / "charts" / "vllm-operator" / "files" / "grafana-dashboard.json"
RATE_INTERVAL = "30s"
# Series that only exist after the operator failed to query Prometheus: the outage scenario's.
AFTER_AN_OUTAGE = ("vllm_operator_prometheus_query_errors_total",)


@dataclass(frozen=True)
class PanelQuery:
    panel: str
    expr: str


def dashboard_queries() -> list[PanelQuery]:
    """Every panel's every target expression, rows' nested panels included."""

    def walk(panels: list[dict[str, Any]]) -> list[PanelQuery]:
        out = []
        for panel in panels:
            out += [PanelQuery(panel["title"], t["expr"]) for t in panel.get("targets", [])]
            out += walk(panel.get("panels", []))
        return out

    return walk(json.loads(DASHBOARD.read_text())["panels"])


def substitute(expr: str, variables: dict[str, str]) -> str:
    """`expr` with the dashboard's variables ($name and ${name}) replaced; unknown ones refused."""
    values = {**variables, "__rate_interval": RATE_INTERVAL}

    def one(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in values:
            raise KeyError(f"dashboard variable ${name} has no value in the e2e substitution")
        return values[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, expr)


def query(cluster: Cluster, expr: str) -> list[dict[str, Any]]:
    """One instant query; the series it returns (possibly none)."""
    url = f"{cluster.prometheus_url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as resp:
        result: list[dict[str, Any]] = json.load(resp)["data"]["result"]
    return result


@contextmanager
def scrape_target(cluster: Cluster, port: int, labels: dict[str, str]) -> Iterator[None]:
    """127.0.0.1:`port` scraped by the cluster's Prometheus (file-based discovery, job "vllm"
    unless `labels` name a job: target labels win over the scrape config's) while in force."""
    path = cluster.targets_dir / f"target_{port}.json"
    path.write_text(json.dumps([{"targets": [f"127.0.0.1:{port}"], "labels": labels}]))
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def prometheus_query(cluster: Cluster, expr: str, timeout: float = 30) -> list[dict[str, Any]]:
    """An instant query to the cluster's Prometheus, waited for until it returns series."""
    return wait_until(lambda: query(cluster, expr) or None, timeout=timeout, what=f"series: {expr}")


def assert_panels_return_data(
    cluster: Cluster, namespace: str, name: str, *, after_an_outage: bool
) -> list[str]:
    """Each panel query of this scenario returns a finite series for the service; titles seen.

    after_an_outage: the queries of the series only an outage creates, else all the others.
    """
    variables = {"namespace": namespace, "vllmservice": name}
    seen = []
    for q in dashboard_queries():
        if any(m in q.expr for m in AFTER_AN_OUTAGE) != after_an_outage:
            continue
        expr = substitute(q.expr, variables)
        # a number Grafana can draw: NaN (a quantile over no observations) is not data
        wait_until(
            lambda e=expr: [s for s in query(cluster, e) if math.isfinite(float(s["value"][1]))],
            timeout=30,
            what=f"panel {q.panel!r} to return a finite series: {expr}",
        )
        seen.append(q.panel)
    assert seen, "no dashboard query in this scenario"
    return seen


# The release the alert expressions are rendered for, unless a test names its own.
RULES_RELEASE, RULES_NAMESPACE = "vllmop", "default"


@functools.cache
def alert_expressions(
    sets: tuple[str, ...] = (), release: str = RULES_RELEASE, namespace: str = RULES_NAMESPACE
) -> dict[str, str]:
    """The chart's PrometheusRule alerts (default values plus `sets`, --set-json) for a release
    with the operator's ServiceMonitor on (VLLMOperatorDown needs it): name -> expr."""
    from tests.chart.support import CHART, Helm, documents, find, toolchain_bin

    helm = Helm(toolchain_bin() / "helm")
    on = ("prometheusRule.enabled=true", "metrics.serviceMonitor.enabled=true")
    text = helm("template", release, str(CHART), "-n", namespace,
                *(a for s in on for a in ("--set", s)),
                *(a for s in sets for a in ("--set-json", s))).stdout  # fmt: skip
    groups = find(documents(text), "PrometheusRule")["spec"]["groups"]
    return {r["alert"]: r["expr"] for g in groups for r in g["rules"]}


def assert_alert_fires(
    cluster: Cluster,
    alert: str,
    labels: dict[str, str],
    *,
    sets: tuple[str, ...] = (),
    release: tuple[str, str] = (RULES_RELEASE, RULES_NAMESPACE),
    timeout: float = 30,
) -> list[dict[str, Any]]:
    """The alert's expression, on the real Prometheus, returns a series with these labels (the
    alert is pending, and fires once its `for:` has passed: the e2e does not wait that long).
    `release`: the (name, namespace) the chart is rendered for."""
    expr = alert_expressions(sets, *release)[alert]

    def mine() -> list[dict[str, Any]]:
        return [s for s in query(cluster, expr) if labels.items() <= s["metric"].items()]

    return wait_until(mine, timeout=timeout, what=f"{alert} {labels} to fire: {expr}")
