"""Decision reasons are one typed list whose values are the wire (status, Events, metric labels)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from vllm_operator.tuning.model import ActionKind
from vllm_operator.tuning.reasons import Reason

TUNING = Path(__file__).resolve().parents[3] / "operator" / "vllm_operator" / "tuning"

# What status, Events and vllm_operator_decisions_total{reason} carry today: renaming one breaks
# dashboards, alerts and the history in stored objects, so it is a deliberate change of this list.
WIRE = (
    "HoldTuningOff", "ReplicasOutOfBounds", "HoldMetricsMissing", "HoldMetricsStale",
    "HoldMetricsPartial", "HoldMetricsInvalid", "HoldMetricsError", "HoldRollout",
    "HoldPodsNotReady", "RetuneSettling", "RetuneKept", "RollbackWorse",
    "CanaryStarted", "CanaryJudging", "CanaryPromoted", "CanaryRemoved", "RetuneByModel",
    "RetuneAhead",
    "RetuneForFewerPods", "RetuneForCapacity", "ScaleUpRejections",
    "RaiseQueueRejections", "LowerActiveSeqsITL", "LowerActiveSeqsPreemption", "ScaleUpLatency",
    "RaiseActiveSeqsWaiting", "RaiseBatchedTokensTTFT", "ScaleUpNearCapacity", "ScaleUpForecast",
    "ScaleDownLowLoad",
    "WithinSLO", "AutoscalingOff", "AutotuneOff", "AtMaxReplicas", "NoFreeGPU", "AtMinReplicas",
    "ScaleUpCooldown", "ScaleDownVoting", "ScaleDownStabilizing", "RetuneCooldown",
    "RestartBudgetExhausted", "HoldAfterRollback", "BudgetUnset", "BudgetAtBound",
    "RetuneAwaitsWindow", "RetuneDoesNotPay", "KVCacheFull", "NewPodsSuffice",
    "RolloutNeedsPods", "NewBudgetsSuffice",
)  # fmt: skip


def test_the_wire_values_are_the_ones_status_and_metrics_carry() -> None:
    assert [r.value for r in Reason] == list(WIRE)
    assert all(str(r) == r.value and f"{r}" == r.value for r in Reason)


def test_every_reason_has_an_action_kind_and_a_one_line_meaning() -> None:
    for r in Reason:
        assert r.kind in get_args(ActionKind), r
        assert r.meaning and "\n" not in r.meaning and len(r.meaning) <= 100, r


def test_no_tuning_module_spells_a_reason_as_a_bare_string() -> None:
    values = {r.value for r in Reason}
    for path in sorted(TUNING.glob("*.py")):
        if path.name == "reasons.py":
            continue
        quoted = set(re.findall(r'"([A-Za-z]+)"', path.read_text()))
        assert not quoted & values, f"{path.name}: use Reason.* for {sorted(quoted & values)}"


def test_every_reason_is_decided_somewhere() -> None:
    code = "\n".join(p.read_text() for p in TUNING.glob("*.py") if p.name != "reasons.py")
    unused = [r.name for r in Reason if f"Reason.{r.name}" not in code]
    assert not unused, f"reasons nothing decides: {unused}"
