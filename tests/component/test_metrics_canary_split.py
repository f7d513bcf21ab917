"""A real Prometheus splits a service's series into the canary pod and the stable pods.

Two twins of one VLLMService, scraped with the labels the monitors give them (build_sd_target);
only one carries serving.vllmop.io/canary. Each side's counters, read through the selectors the
canary judgement uses (metrics/queries.py), are that side's own: `!="true"` matches the stable
pod, whose series have no canary label at all.
"""

from __future__ import annotations

from pathlib import Path

from tests.component.test_metrics_live import (
    NAME,
    NS,
    instant,
    running_prometheus,
    running_twin,
    send_bursts,
)
from tests.support.wait import wait_until
from vllm_operator.config import OperatorConfig
from vllm_operator.metrics.prometheus import build_prometheus
from vllm_operator.metrics.queries import build_selector

STABLE_POD, CANARY_POD = "chat-6d5f8b7c9-x2x4q", "chat-canary-7f9c4d6b5-k8m2p"


def test_canary_and_stable_selectors_split_the_series(tmp_path: Path) -> None:
    with (
        running_twin(tmp_path, "stable.log") as stable,
        running_twin(tmp_path, "canary.log") as canary,
        running_prometheus(
            tmp_path,
            {STABLE_POD: stable.port, CANARY_POD: canary.port},
            canaries=frozenset({CANARY_POD}),
        ) as p,
    ):
        prom = build_prometheus(OperatorConfig(prometheus_url=p.url, prometheus_timeout_seconds=5))
        sel = {group: build_selector(NS, NAME, group) for group in ("all", "canary", "stable")}
        wait_until(
            lambda: instant(prom, f"count(up{sel['all']} == 1)") == 2,
            timeout=20,
            what="both twins scraped",
        )
        on_canary = send_bursts(canary.base, bursts=1, size=3).count(200)
        on_stable = send_bursts(stable.base, bursts=2, size=2).count(200)
        assert on_canary != on_stable  # the sides must differ for the split to show

        def finished(group: str) -> float | None:
            return instant(prom, f"sum(vllm:request_success_total{sel[group]})")

        wait_until(
            lambda: finished("all") == on_canary + on_stable,
            timeout=20,
            what="a scrape after the traffic",
        )
        assert (finished("canary"), finished("stable")) == (on_canary, on_stable)
        assert instant(prom, f"count(up{sel['canary']})") == 1
        assert instant(prom, f"count(up{sel['stable']})") == 1
