"""The engine model's budget move on the real control plane: one move, where replicas cannot help.

The load rises: a warm-up the valve admits, then four times what it lets through. The tuner
waits until its window holds only the rise (RetuneAwaitsWindow), then makes the model's move.
Time is compressed as in test_control_loop.py (tuning every 2 s, cooldowns and the payback x0.05,
20 s windows); every wait is on a condition.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.harness import Harness
from tests.support.kube import Cluster
from tests.support.load import BackgroundLoad
from tests.support.operator import OperatorProcess
from tests.support.vllmsvc import (
    assert_spec_untouched,
    chat_service,
    condition,
    decisions,
    flag,
    get,
    start,
    tuning_status,
)
from tests.support.wait import wait_until

from vllm_operator.tuning.settings import TuningSettings

pytestmark = pytest.mark.e2e


def capped_service(namespace: str, name: str) -> dict[str, Any]:
    """One H100 pod and no GPU for a second (maxReplicas 1), its entry valve far too tight: two
    requests in flight where the running layer holds eight."""
    return chat_service(
        namespace,
        name,
        budgets={"queue": {"maxRequests": 2}, "running": {"maxSeqs": 8}},
        autoscaling={"enabled": True, "minReplicas": 1, "maxReplicas": 1},
        autotune={"mode": "Auto", "maxRestartsPerHour": 1},
    )


# Warm-up: 0.2 req/s, which the valve of 2 admits whole (seed 7's arrivals never put three
# within 2.5 s of each other in 40 s, and a request takes under a second), so the token
# histograms hold finished requests before any 503. The rise: 8 req/s, about four times what two
# in flight serve; a queue of 8 serves about 90% of it by the engine model, a longer one (the
# default range reaches x8) more, so the 503 share falls far under half of what it was.
WARM_UP = 0.2
RISE = 8.0


def test_a_gpu_capped_service_gets_one_budget_move_that_lowers_its_503_share(
    cluster: Cluster, operator_process: OperatorProcess, namespace: str, harness: Harness
) -> None:
    obj = capped_service(namespace, "capped")
    url = start(cluster, harness, obj)
    warm = BackgroundLoad(url, rate=WARM_UP, duration=40, prompt=200, output=100).start()
    load = None
    try:

        def measured() -> dict[str, Any] | None:
            model: dict[str, Any] | None = tuning_status(cluster, namespace, "capped").get(
                "modelCapacity"
            )
            return model

        wait_until(measured, timeout=60, what="the engine model's capacity from the warm-up")
        early = [d for d in decisions(cluster, namespace, "capped") if d["action"] != "Hold"]
        assert not early, early  # the warm-up is within the SLO: nothing moved
        load = BackgroundLoad(url, rate=RISE, duration=200, prompt=200, output=100).start()

        def moved() -> dict[str, Any] | None:
            made = [
                d for d in decisions(cluster, namespace, "capped") if d["action"] == "SetBudget"
            ]
            return made[0] if made else None

        try:
            move = wait_until(moved, timeout=120, what="a budget move at maxReplicas")
        except AssertionError as exc:
            recent = decisions(cluster, namespace, "capped")[-3:]
            raise AssertionError(f"{exc}; last decisions: {recent}") from None
        history = decisions(cluster, namespace, "capped")
        assert move["reason"] == "RetuneByModel", (move, history)
        assert move["field"] == "maxRequests", move
        # one move past the x2 step the rules would take, within the default range
        factor = TuningSettings().default_bound_factor
        assert 2 * move["fromValue"] < move["toValue"] <= factor * move["fromValue"], move
        assert "replicas at maxReplicas 1" in move["message"], move
        assert "the engine model predicts" in move["message"], move
        # it waited for a window that holds only the rise, not the warm-up's mix
        waited = [d["reason"] for d in history[: history.index(move)]]
        assert "RetuneAwaitsWindow" in waited, history
        before = move["figures"]["rejection_ratio"]
        assert before > 0.05, move
        target = str(move["toValue"])
        wait_until(
            lambda: any(
                flag(t["args"], "--max-num-queued-reqs") == target
                for t in harness.ready_twins(namespace, "capped").values()
            ),
            timeout=60,
            what=f"a twin running --max-num-queued-reqs {target}",
        )
        seen: list[tuple[Any, Any]] = []  # (503 share, TuningActive reason) per probe

        def lowered() -> float | None:
            st = get(cluster, "vllmservice", namespace, "capped")["status"]
            ratio = st.get("metrics", {}).get("rejectionRatio")
            reason = condition({"status": st}, "TuningActive").get("reason")
            if not seen or seen[-1] != (ratio, reason):
                seen.append((ratio, reason))
            return ratio if ratio is not None and ratio < before / 2 else None

        try:
            wait_until(lowered, timeout=120, what=f"the 503 share under half of {before:.0%}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; (503 share, reason) seen: {seen[-12:]}") from None
        made = [d for d in decisions(cluster, namespace, "capped") if d["action"] == "SetBudget"]
        assert len(made) == 1, made  # one move, not a x2 step per cooldown
    finally:
        warm.join(timeout=0)
        if load is not None:
            load.join(timeout=0)
    assert_spec_untouched(cluster, namespace, "capped")
