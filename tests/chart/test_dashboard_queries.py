"""The e2e runs every dashboard panel's queries (tests/support/prometheus.py): the extraction and
variable substitution it relies on, checked here without a cluster."""

from __future__ import annotations

import json

import pytest

from tests.support.prometheus import DASHBOARD, dashboard_queries, substitute


def test_every_panel_with_targets_is_extracted() -> None:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    titles = {p["title"] for p in panels if p.get("targets")}
    assert {q.panel for q in dashboard_queries()} == titles
    assert len(dashboard_queries()) == sum(len(p.get("targets", [])) for p in panels)


def test_substitution_leaves_no_dashboard_variable() -> None:
    variables = [v["name"] for v in json.loads(DASHBOARD.read_text())["templating"]["list"]]
    values = {name: "x" for name in variables}
    for q in dashboard_queries():
        assert "$" not in substitute(q.expr, values), q
    with pytest.raises(KeyError, match=r"\$namespace"):
        substitute('up{namespace=~"$namespace"}', {})
    assert substitute("rate(x[${__rate_interval}])", {}) == "rate(x[30s])"
