"""The chart's PrometheusRule and Grafana dashboard against the real Prometheus tooling.

`promtool check rules` parses every expression and template the rendered PrometheusRule holds;
`promtool test rules` then evaluates the alerts on synthetic series shaped like vLLM 0.33's and
the operator's, so each alert is shown to fire when it should and to stay quiet when it should
not. promtool comes with Debian's prometheus package (`make install-system`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.support import VALUES_DIR, Helm, documents, find, run

SVC = {"namespace": "llm", "serving_vllmop_io_vllmservice": "chat"}
CALM = {"namespace": "llm", "serving_vllmop_io_vllmservice": "calm"}
ALERT_LABELS = {"team": "ml-platform"}  # alertLabels of values/full.yaml


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool missing: `make install-system` installs Debian's prometheus package"
    return path


def series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{inner}}}", "values": values}


@pytest.fixture(scope="module")
def rules_file(helm_bin: Helm, tmp_path_factory: pytest.TempPathFactory) -> Path:
    docs = documents(helm_bin.template(values=[VALUES_DIR / "full.yaml"]).stdout)
    rule = find(docs, "PrometheusRule")
    path = tmp_path_factory.mktemp("rules") / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
    return path


def test_promtool_accepts_the_rendered_rules(rules_file: Path) -> None:
    out = run([promtool(), "check", "rules", str(rules_file)])
    assert "SUCCESS: 7 rules found" in out.stdout, out.stdout
    groups = yaml.safe_load(rules_file.read_text())["groups"]
    assert [r["alert"] for g in groups for r in g["rules"]] == [
        "VLLMServiceRejectionRatioOverBudget",
        "VLLMServiceTTFTSLOBurn",
        "VLLMServiceITLP95High",
        "VLLMOperatorTunerPinnedAtBound",
        "VLLMOperatorMetricsUnavailable",
        "VLLMOperatorReconcileSlow",
        "VLLMOperatorDown",
    ]


def _labels(extra: dict[str, str], severity: str) -> dict[str, str]:
    return {**extra, "severity": severity, **ALERT_LABELS}


def _notes(summary: str, description: str) -> dict[str, str]:
    return {"summary": summary, "description": description}


def _alert_tests() -> list[dict[str, Any]]:
    vllm = "vllm:admission_rejections_total"
    ok = "vllm:request_success_total"
    ttft_b, ttft_c = (
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:time_to_first_token_seconds_count",
    )
    itl = "vllm:inter_token_latency_seconds_bucket"
    engine = {"engine": "0", "model_name": "chat"}
    return [
        {
            "interval": "1m",
            "input_series": [
                # chat: 10 of 100 requests a minute refused (10%); calm: none refused
                series(
                    vllm, {**SVC, "reason": "max_num_queued_reqs", "model_name": "chat"}, "0+10x40"
                ),
                series(ok, {**SVC, **engine, "finished_reason": "stop"}, "0+90x40"),
                series(
                    vllm, {**CALM, "reason": "max_num_queued_reqs", "model_name": "c"}, "0+0x40"
                ),
                series(ok, {**CALM, **engine, "finished_reason": "stop"}, "0+90x40"),
            ],
            "alert_rule_test": [
                {
                    "eval_time": "8m",
                    "alertname": "VLLMServiceRejectionRatioOverBudget",
                    "exp_alerts": [],
                },
                {
                    "eval_time": "20m",
                    "alertname": "VLLMServiceRejectionRatioOverBudget",
                    "exp_alerts": [
                        {
                            "exp_labels": _labels(SVC, "warning"),
                            "exp_annotations": {
                                "summary": "llm/chat refuses 10% of requests with 503",
                                "description": (
                                    "vLLM's entry valve (--max-num-queued-reqs / "
                                    "--max-num-queued-tokens) refuses more than 0.01 of the "
                                    "requests. Add replicas or raise spec.budgets.queue; raising "
                                    "running.maxActiveSeqs alone does not help. See "
                                    "docs/troubleshooting.md#rejection-ratio-over-budget."
                                ),
                            },
                        }
                    ],
                },
            ],
        },
        {
            "interval": "1m",
            "input_series": [
                # chat: 90% of first tokens later than 0.5 s (burn 18 > 14.4); calm: 50% (burn 10)
                series(ttft_b, {**SVC, **engine, "le": "0.5"}, "0+10x90"),
                series(ttft_c, {**SVC, **engine}, "0+100x90"),
                series(ttft_b, {**CALM, **engine, "le": "0.5"}, "0+50x90"),
                series(ttft_c, {**CALM, **engine}, "0+100x90"),
            ],
            "alert_rule_test": [
                {
                    "eval_time": "70m",
                    "alertname": "VLLMServiceTTFTSLOBurn",
                    "exp_alerts": [
                        {
                            "exp_labels": _labels(SVC, "critical"),
                            "exp_annotations": _notes(
                                "llm/chat burns its TTFT SLO budget 18.0x too fast",
                                "More than 0.05 x 14.4 of the requests wait longer than 0.5s for "
                                "their first token. Long prompts: bound "
                                "spec.budgets.queue.maxPrefillTokens and check "
                                "spec.budgets.tokens.maxBatchedTokens. See "
                                "docs/troubleshooting.md#ttft-slo-burn.",
                            ),
                        }
                    ],
                },
            ],
        },
        {
            "interval": "1m",
            "input_series": [
                # chat: p95 between 0.1 and 0.2 s; calm: every token within 0.05 s
                series(itl, {**SVC, **engine, "le": "0.05"}, "0+10x40"),
                series(itl, {**SVC, **engine, "le": "0.1"}, "0+20x40"),
                series(itl, {**SVC, **engine, "le": "0.2"}, "0+100x40"),
                series(itl, {**SVC, **engine, "le": "+Inf"}, "0+100x40"),
                series(itl, {**CALM, **engine, "le": "0.05"}, "0+100x40"),
                series(itl, {**CALM, **engine, "le": "0.1"}, "0+100x40"),
                series(itl, {**CALM, **engine, "le": "0.2"}, "0+100x40"),
                series(itl, {**CALM, **engine, "le": "+Inf"}, "0+100x40"),
            ],
            "alert_rule_test": [
                {"eval_time": "10m", "alertname": "VLLMServiceITLP95High", "exp_alerts": []},
                {
                    "eval_time": "30m",
                    "alertname": "VLLMServiceITLP95High",
                    "exp_alerts": [
                        {
                            "exp_labels": _labels(SVC, "warning"),
                            "exp_annotations": _notes(
                                "llm/chat p95 inter-token latency is 193.8ms",
                                "Per-token latency is above 0.1s. With few 503s this means the "
                                "decode batch is too big: lower "
                                "spec.budgets.running.maxActiveSeqs and check KV-cache headroom "
                                "and preemptions. See docs/troubleshooting.md#itl-p95-high.",
                            ),
                        }
                    ],
                },
            ],
        },
        {
            "interval": "1m",
            "input_series": [
                series(
                    "vllm_operator_tuning_at_bound",
                    {
                        "namespace": "llm",
                        "vllmservice": "chat",
                        "field": "maxActiveSeqs",
                        "pod": "op-0",
                    },
                    "1x90",
                ),
                series(
                    "vllm_operator_tuning_at_bound",
                    {
                        "namespace": "llm",
                        "vllmservice": "calm",
                        "field": "maxActiveSeqs",
                        "pod": "op-0",
                    },
                    "0x90",
                ),
                series(
                    "vllm_operator_prometheus_query_errors_total",
                    {"namespace": "vllm-system", "pod": "op-0"},
                    "0+3x90",
                ),
            ],
            "alert_rule_test": [
                {
                    "eval_time": "30m",
                    "alertname": "VLLMOperatorTunerPinnedAtBound",
                    "exp_alerts": [],
                },
                {
                    "eval_time": "75m",
                    "alertname": "VLLMOperatorTunerPinnedAtBound",
                    "exp_alerts": [
                        {
                            "exp_labels": _labels(
                                {
                                    "namespace": "llm",
                                    "vllmservice": "chat",
                                    "field": "maxActiveSeqs",
                                },
                                "warning",
                            ),
                            "exp_annotations": _notes(
                                "llm/chat: the tuner is pinned at a bound of maxActiveSeqs",
                                "The tuner has held maxActiveSeqs at a bound of "
                                "spec.autotune.bounds for 1h. Widen the bound, or add replicas "
                                "(spec.autoscaling.maxReplicas). See "
                                "docs/troubleshooting.md#tuner-pinned-at-a-bound.",
                            ),
                        }
                    ],
                },
                {
                    "eval_time": "30m",
                    "alertname": "VLLMOperatorMetricsUnavailable",
                    "exp_alerts": [
                        {
                            "exp_labels": _labels(
                                {"namespace": "vllm-system", "pod": "op-0"}, "warning"
                            ),
                            "exp_annotations": _notes(
                                "vllm-operator cannot query Prometheus",
                                "Queries to config.prometheusUrl have failed for 15m; tuning and "
                                "autoscaling hold their last values. See "
                                "docs/troubleshooting.md#metrics-unavailable.",
                            ),
                        }
                    ],
                },
                {
                    # no scrape of the operator at all
                    "eval_time": "30m",
                    "alertname": "VLLMOperatorDown",
                    "exp_alerts": [
                        {
                            "exp_labels": _labels({}, "critical"),
                            "exp_annotations": _notes(
                                "vllm-operator is not running (no scrape of its /metrics)",
                                "No VLLMService is reconciled or tuned while the operator is "
                                "down; the vLLM pods keep serving with their last flags.",
                            ),
                        }
                    ],
                },
            ],
        },
    ]


def test_alerts_fire_on_vllm_shaped_series_and_only_then(rules_file: Path) -> None:
    test_file = rules_file.parent / "rules_test.yaml"
    test_file.write_text(
        yaml.safe_dump(
            {"rule_files": [rules_file.name], "evaluation_interval": "1m", "tests": _alert_tests()},
            sort_keys=False,
        )
    )
    proc = run([promtool(), "test", "rules", str(test_file)], check=False, cwd=rules_file.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_every_dashboard_query_parses(helm_bin: Helm, tmp_path: Path) -> None:
    docs = documents(helm_bin.template(values=[VALUES_DIR / "full.yaml"]).stdout)
    dashboard = json.loads(
        find(docs, "ConfigMap", "vllmop-vllm-operator-dashboard")["data"]["vllm-operator.json"]
    )
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    titles = {p["title"] for p in dashboard["panels"]}
    assert {
        "503 ratio (entry valve)",
        "TTFT p95",
        "ITL p95",
        "Replicas serving",
        "Tuning decisions",
    } <= titles
    # Grafana's variables, as Grafana substitutes them, so promtool can parse the queries
    subst = {"$__rate_interval": "5m", "$namespace": ".*", "$vllmservice": ".*"}
    rules = []
    for i, expr in enumerate(exprs):
        for var, value in subst.items():
            expr = expr.replace(var, value)
        assert "$" not in expr, expr
        rules.append({"record": f"dashboard:panel_{i}", "expr": expr})
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    out = run([promtool(), "check", "rules", str(path)])
    assert f"SUCCESS: {len(rules)} rules found" in out.stdout
    # every datasource reference goes through the variable, so the dashboard imports anywhere
    for panel in dashboard["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
