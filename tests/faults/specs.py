"""The specs of the fault tests' services, as data: the cluster tests apply them, and the unit
tests pin what the tuner's model makes of them (tests/unit/tuning/test_fault_specs.py), so a
change to the model that would make a fault test's "nothing to do" service move shows up in a
one-second test, not only on the cluster tier."""

from __future__ import annotations

from typing import Any, TypedDict

# The steady service of test_prometheus_restart_and_counter_resets_hold_with_a_reason_and_move_
# nothing: budgets fitted to its load, so no budget move raises what a pod serves (with the
# default valve of 8, rule 9b's capacity bet moves a steady pod at its floor, docs/tuning.md).
STEADY: dict[str, Any] = {
    "budgets": {
        "queue": {"maxRequests": 128},
        "running": {"maxSeqs": 64, "maxActiveSeqs": 64},
    },
    "autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 3},
}


class Load(TypedDict):
    rate: float  # requests per second
    prompt: int  # tokens
    output: int


# and the load it gets
STEADY_LOAD: Load = {"rate": 1.0, "prompt": 200, "output": 100}


def tuned_spec(gpu: str = "H100-80GB", **spec: Any) -> dict[str, Any]:
    """One GPU, autoscaling 1..2 and autotune Auto: both the reconcile and the tuner are busy.
    `spec` replaces top-level keys (None removes one)."""
    body: dict[str, Any] = {
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "gpu": {"type": gpu},
        "replicas": 1,
        "budgets": {"queue": {"maxRequests": 8}, "running": {"maxSeqs": 8}},
        "slo": {"ttftP95": "2s", "itlP95": "100ms", "maxRejectionRatio": 0.05},
        "autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 2},
        "autotune": {"mode": "Auto", "maxRestartsPerHour": 2},
        **spec,
    }
    return {k: v for k, v in body.items() if v is not None}  # None: leave the key out
