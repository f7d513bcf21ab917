"""docs/metrics.md's table of alerts and panels: every alert of the chart's PrometheusRule and
every dashboard panel has a row, and each row names a test that really checks it, so a new alert
or panel without a scenario on the real Prometheus fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.prometheus import dashboard_queries

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "charts" / "vllm-operator" / "templates" / "prometheusrule.yaml"
SECTION = "## Alerts and panels on the real Prometheus"
ROW = re.compile(
    r"^\| (?:`(?P<alert>\w+)`|panel \"(?P<panel>[^\"]+)\") \| `(?P<test>[^`]+)` \|", re.M
)


def table() -> list[tuple[str | None, str | None, str]]:
    """(alert, panel, test) per row; one of alert and panel is None."""
    text = (ROOT / "docs" / "metrics.md").read_text()
    assert SECTION in text, f"docs/metrics.md has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = [(m["alert"], m["panel"], m["test"]) for m in ROW.finditer(section)]
    assert rows, "the table has no rows"
    return rows


def shipped_alerts(rules: str) -> list[str]:
    return re.findall(r"^\s*- alert: (\w+)$", rules, flags=re.M)


def alerts_without_a_row(rules: str) -> set[str]:
    return set(shipped_alerts(rules)) - {alert for alert, _, _ in table() if alert}


def source_of(ref: str) -> str:
    """The source of the test function `path::name`."""
    path, _, name = ref.partition("::")
    text = (ROOT / path).read_text()
    hits = [n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == name]
    assert hits, f"{ref}: no such test"
    return ast.get_source_segment(text, hits[0]) or ""


def test_every_alert_has_a_scenario_that_asserts_it() -> None:
    rules = RULES.read_text()
    assert len(shipped_alerts(rules)) >= 7
    assert alerts_without_a_row(rules) == set()
    for alert, _, ref in table():
        if alert:
            assert alert in shipped_alerts(rules), f"{alert}: a row for an alert not shipped"
            source = source_of(ref)
            assert f'"{alert}"' in source and "assert_alert_fires" in source, (alert, ref)


def test_a_new_alert_without_a_row_is_reported() -> None:
    rules = RULES.read_text() + "        - alert: VLLMServiceSomethingNew\n"
    assert alerts_without_a_row(rules) == {"VLLMServiceSomethingNew"}


def test_every_dashboard_panel_has_a_scenario_that_queries_it() -> None:
    rows = [(panel, ref) for _, panel, ref in table() if panel]
    assert {panel for panel, _ in rows} == {q.panel for q in dashboard_queries()}
    for panel, ref in rows:
        assert "assert_panels_return_data" in source_of(ref), (panel, ref)
