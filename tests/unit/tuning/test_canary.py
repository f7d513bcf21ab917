"""tuning/canary.py: a canary's figures against the stable pods' over the same window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vllm_operator.tuning.canary import Canary, judge_canary
from vllm_operator.tuning.inputs import Targets

T0 = datetime(2026, 12, 1, 12, tzinfo=UTC)
TARGETS = Targets(ttft=0.5, itl=0.06, max_rejection_ratio=0.01)
WINDOW = timedelta(seconds=120)
RAISE = Canary("maxRequests", 32, 64, started_at=T0, ready_at=T0 + timedelta(seconds=240))
LATER = T0 + timedelta(seconds=600)


def judge(canary: Canary, on_canary: dict[str, float], on_stable: dict[str, float],
          now: datetime = LATER) -> tuple[str, str]:  # fmt: skip
    verdict = judge_canary(
        canary, on_canary, on_stable, targets=TARGETS, now=now, window=WINDOW,
        evaluation_delay=timedelta(seconds=180), deadline=timedelta(seconds=1800),
        margin=0.1, hold=timedelta(seconds=1800),
    )  # fmt: skip
    return verdict.kind, verdict.message


BUSY = {"request_rate": 1.0, "rejection_ratio": 0.05, "ttft_p95": 0.3}


def test_a_canary_that_cuts_503s_without_breaking_ttft_is_promoted() -> None:
    kind, message = judge(RAISE, {**BUSY, "rejection_ratio": 0.002, "ttft_p95": 0.35}, BUSY)
    assert kind == "Promote"
    assert message == (
        "canary queue.maxRequests 32 -> 64 held: rejection_ratio 0.2% on the canary vs 5.0%; "
        "ttft_p95 0.35s on the canary vs 0.30s; promoted"
    )


def test_a_canary_that_pushes_ttft_over_its_slo_is_removed_with_both_sides_quoted() -> None:
    kind, message = judge(RAISE, {**BUSY, "rejection_ratio": 0.0, "ttft_p95": 0.9}, BUSY)
    assert kind == "Remove"
    assert message.startswith(
        "canary queue.maxRequests 32 -> 64 made ttft_p95 0.90s on the canary vs 0.30s on the "
        "stable pods: removed, no move up for 1800s"
    )


def test_a_targeted_figure_worse_on_the_canary_removes_it() -> None:
    lower = Canary("maxActiveSeqs", 64, 32, started_at=T0, ready_at=T0)
    stable = {"request_rate": 1.0, "itl_p95": 0.07, "ttft_p95": 0.3}
    kind, _ = judge(lower, {**stable, "itl_p95": 0.09}, stable)
    assert kind == "Remove"
    kind, _ = judge(lower, {**stable, "itl_p95": 0.05}, stable)
    assert kind == "Promote"


@pytest.mark.parametrize(
    ("canary", "now", "rate", "kind", "says"),
    [
        (Canary("maxRequests", 32, 64, T0), T0 + timedelta(seconds=60), 1.0, "Wait", "starting"),
        (Canary("maxRequests", 32, 64, T0), T0 + timedelta(hours=1), 1.0, "Remove", "ready"),
        (RAISE, RAISE.ready_at + timedelta(seconds=100), 1.0, "Wait", "judged in 80s"),
        (RAISE, LATER, 0.1, "Wait", "waits for traffic"),  # 12 requests in the window
        (RAISE, T0 + timedelta(hours=1), 0.1, "Remove", "too little traffic"),
    ],
)
def test_a_canary_is_judged_only_when_ready_settled_and_busy(
    canary: Canary, now: datetime, rate: float, kind: str, says: str
) -> None:
    verdict, message = judge(canary, {**BUSY, "request_rate": rate}, BUSY, now=now)
    assert verdict == kind and says in message, message
