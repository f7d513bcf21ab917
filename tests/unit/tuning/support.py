"""Builders for tuning tests: a spec, a steady snapshot, a fixed clock; rows override the rest."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.tuning.model import (
    Decision,
    FleetView,
    MetricsSnapshot,
    RateSample,
    TuningState,
)
from vllm_operator.tuning.settings import TuningSettings

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
LONG_AGO = T0 - timedelta(hours=2)  # past every cooldown and stabilisation

_SPEC: dict[str, Any] = {
    "model": "m",
    "gpu": {"type": "H100-80GB"},
    "replicas": 2,
    "budgets": {
        "queue": {"maxRequests": 32},
        "running": {"maxSeqs": 16, "maxActiveSeqs": 8},
        "tokens": {"maxBatchedTokens": 4096},
    },
    "slo": {"ttftP95": "500ms", "itlP95": "50ms", "maxRejectionRatio": 0.01},
    "autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 4},
    "autotune": {"mode": "Auto", "maxRestartsPerHour": 2},
}


def _merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def spec(**patch: Any) -> VLLMServiceSpec:
    """The base spec with `patch` deep-merged (None deletes a key)."""
    return VLLMServiceSpec.model_validate(_merge(_SPEC, patch))


# Steady and within SLO, but not low load: 4 running per pod of an active cap of 8, none waiting;
# TTFT at 60% and ITL at 70% of their SLOs.
_SNAP = MetricsSnapshot(
    observed_at=T0,
    window_seconds=120.0,
    quality="ok",
    pods_expected=2,
    pods_scraped=2,
    request_rate=10.0,
    rejection_rate=0.0,
    rejection_ratio=0.0,
    ttft_p95=0.3,
    itl_p95=0.035,
    queue_time_p95=0.05,
    waiting=0.0,
    running=8.0,
    kv_usage=0.4,
    preemption_rate=0.0,
    prompt_tokens_per_request=500.0,
    fleet=FleetView(desired=2, ready=2, updated=2, rolling=False),
)


def snap(**changes: Any) -> MetricsSnapshot:
    return replace(_SNAP, **changes)


def state(**changes: Any) -> TuningState:
    """A tuner that has run before: replicas 2, last scaled long ago."""
    return replace(TuningState(desired_replicas=2, last_scale_at=LONG_AGO), **changes)


def seen(rate: float = 10.0, at: datetime = T0) -> tuple[RateSample, ...]:
    """The arrivals a pass at `at` remembers for the forecast (the default snapshot's rate)."""
    return (RateSample(at, rate),)


def watched(pods: int, rate: float, **changes: Any) -> TuningState:
    """A tuner on `pods` pods that has seen `rate` for the whole long window (under_window)."""
    minutes = int(TuningSettings().under_window.total_seconds() // 60)
    arrivals = tuple(RateSample(T0 - timedelta(minutes=k), rate) for k in range(minutes, 0, -1))
    return state(desired_replicas=pods, arrivals=arrivals, **changes)


def history(*rates: float, step: float = 30.0) -> tuple[RateSample, ...]:
    """Rates of the passes before T0, oldest first, one every `step` seconds."""
    n = len(rates)
    return tuple(RateSample(T0 - timedelta(seconds=step * (n - k)), r) for k, r in enumerate(rates))


def brief(decision: Decision) -> tuple[str, str, str | None, int | None, int | None]:
    """(action, reason, field, from, to): the part of a decision a table row pins."""
    a = decision.action
    return (a.kind, decision.reason, a.field, a.from_value, a.to_value)


def at_cap(per_pod: float = 6.4, pods: int = 2) -> float:
    """Summed running for `per_pod` running per pod (6.4 = 80% of the base active cap 8)."""
    return per_pod * pods
