"""handlers/tune.py against the recording fake API server and recorded Prometheus answers."""

from __future__ import annotations

import itertools
import logging
from datetime import timedelta
from typing import Any

import pytest
import requests

from tests.component.handlers import (
    LOG,
    Killed,
    condition,
    deployment,
    deps_for,
    die_at_write,
    example,
    serve,
    service,
)
from tests.component.test_status_write import tuner_patch
from tests.support.fake_kube import FakeKube
from tests.unit.metrics.fake import FakePrometheus, Recording, load
from tests.unit.tuning.support import T0, spec, watched
from tests.unit.tuning.test_retune_pods import BLOG, PODS, RATE, fleet
from vllm_operator import constants as c
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.handlers.tune import decide_in_budget, tune, write_tuner_status
from vllm_operator.metrics.past_period import past_span
from vllm_operator.observability import REGISTRY
from vllm_operator.status.pods import selector_for
from vllm_operator.tuning.look_budget import LookBudget
from vllm_operator.tuning.reasons import Reason
from vllm_operator.tuning.settings import TuningSettings

TRAFFIC = load("traffic-two-pods.json")  # 503 ratio 62%, TTFT p95 39 ms, KV 0%, 2 pods
IDLE = load("idle-two-pods.json")  # no requests at all
# the blog's budgets on 5 pods within the SLO: the look finds a move (test_retune_pods.py)
BLOG_SPEC = spec(**BLOG, replicas=PODS).model_dump(by_alias=True, exclude_none=True)
# TTFT without headroom: rule 2 scales up on the recording's 503s
TIGHT_SLO = {"ttftP95": "10ms", "itlP95": "50ms", "maxRejectionRatio": 0.02}
BOUNDS = {"maxRequests": {"min": 16, "max": 256}, "maxActiveSeqs": {"min": 4, "max": 32}}


def served(recording: Recording, **spec: Any) -> tuple[FakeKube, Any, dict[str, Any]]:
    """A Ready team-a/chat from examples/autotune-recommend.yaml (2 replicas) with `spec`."""
    kube = FakeKube()
    deps = deps_for(kube, recording.now, recording)
    body = serve(kube, example("autotune-recommend.yaml", replicas=2, **spec), deps)
    return kube, deps, body


def auto(**extra: Any) -> dict[str, Any]:
    return {"autotune": {"mode": "Auto", "bounds": BOUNDS, "maxRestartsPerHour": 1, **extra}}


def args(kube: FakeKube) -> list[str]:
    container = deployment(kube)["spec"]["template"]["spec"]["containers"][0]
    return list(container["args"])


def scale_ups_counted() -> float:
    """vllm_operator_decisions_total for applied ScaleUpRejections decisions, so far."""
    counted = {"kind": "ScaleReplicas", "reason": "ScaleUpRejections", "applied": "true"}
    return REGISTRY.get_sample_value("vllm_operator_decisions_total", counted) or 0.0


def test_a_scale_up_applies_replicas_under_the_tuners_field_manager() -> None:
    # TTFT without headroom (SLO 10 ms): rule 2 scales
    kube, deps, body = served(TRAFFIC, slo=TIGHT_SLO)
    before = len(kube.applies)
    count = scale_ups_counted()
    decision = tune(body, deps=deps, logger=LOG)
    assert decision is not None and decision.reason == Reason.SCALE_UP_REJECTIONS
    assert scale_ups_counted() == count + 1
    writes = kube.applies[before:]
    scale = [a for a in writes if a.kind == "Deployment"]
    assert [(a.field_manager, a.obj["spec"]) for a in scale] == [(c.FM_TUNER, {"replicas": 3})]
    assert deployment(kube)["spec"]["replicas"] == 3
    (status,) = [a for a in writes if a.kind == c.KIND]
    assert (status.field_manager, status.subresource) == (c.FM_TUNER, "status")
    tuning = service(kube)["status"]["tuning"]
    assert tuning["desiredReplicas"] == 3
    assert tuning["lastDecisions"][-1]["reason"] == "ScaleUpRejections"
    assert condition(service(kube), c.COND_TUNING_ACTIVE)["reason"] == "ScaleUpRejections"
    assert [(e["reason"], e["type"]) for e in kube.events[-1:]] == [("ScaleUpRejections", "Normal")]


def scale_steps(kube: FakeKube) -> list[tuple[int, int]]:
    records = service(kube)["status"]["tuning"]["lastDecisions"]
    return [(d["fromValue"], d["toValue"]) for d in records if d["action"] == "ScaleReplicas"]


@pytest.mark.parametrize("dies_at", [0, 1, 2], ids=["status", "replicas", "event"])
def test_a_pass_killed_at_any_write_is_neither_lost_nor_taken_twice(
    monkeypatch: Any, dies_at: int
) -> None:
    # a scale-up pass (status, replicas, Event) killed at each write in turn; the next pass (the
    # standby's after an HA handover) decides from what was recorded, and the Deployment ends at
    # the recorded count: with the replicas written first, a pass killed before its record had
    # the next one decide the same step again (tests/faults/test_ha.py)
    kube, deps, body = served(TRAFFIC, slo=TIGHT_SLO)
    with monkeypatch.context() as m:
        die_at_write(kube, m, dies_at)
        with pytest.raises(Killed):
            tune(body, deps=deps, logger=LOG)
    recorded, scaled = dies_at > 0, dies_at > 1  # the writes before the one it died at
    assert service(kube)["status"].get("tuning", {}).get("desiredReplicas") == (
        3 if recorded else None
    )
    assert deployment(kube)["spec"]["replicas"] == (3 if scaled else 2)

    for _ in range(2):
        tune(service(kube), deps=deps, logger=LOG)

    steps = scale_steps(kube)
    assert steps.count((2, 3)) == 1, steps  # not decided again from the lagging Deployment
    assert all(a[1] == b[0] for a, b in itertools.pairwise(steps)), steps
    desired = service(kube)["status"]["tuning"]["desiredReplicas"]
    assert deployment(kube)["spec"]["replicas"] == desired == steps[-1][1]


@pytest.mark.parametrize("dies_at", [0, 1, 2], ids=["status", "event", "re-render"])
def test_a_budget_move_killed_at_any_write_reaches_the_pods_once(
    monkeypatch: Any, dies_at: int
) -> None:
    # a budget move's pass (status, Event, re-render) killed at each write in turn: the next
    # pass renders the recorded override into the Deployment rather than judging, later, a
    # change no pod runs, and decides the move only once
    kube, deps, body = served(TRAFFIC, **auto())
    with monkeypatch.context() as m:
        die_at_write(kube, m, dies_at)
        with pytest.raises(Killed):
            tune(body, deps=deps, logger=LOG)
    assert "64" in args(kube)  # not rendered yet

    tune(service(kube), deps=deps, logger=LOG)

    flags = args(kube)
    assert flags[flags.index("--max-num-queued-reqs") + 1] == "128"
    tuning = service(kube)["status"]["tuning"]
    assert tuning["overrides"] == {"maxRequests": 128}
    moves = [d for d in tuning["lastDecisions"] if d["action"] == "SetBudget"]
    assert len(moves) == 1, moves


def test_a_pass_whose_status_write_is_dropped_writes_nothing_else() -> None:
    # a pass read before a newer pass decided: its write is refused (handlers/status_write.py),
    # and so are its replicas patch and its Event, which that record would have explained
    kube, deps, older = served(TRAFFIC, slo=TIGHT_SLO)
    newer = {"desiredReplicas": 2, "scaleDownVotes": 1}  # a newer pass's memory: it held
    write_tuner_status(deps, service(kube), tuner_patch(**newer), LOG)
    writes, events = len(kube.applies), len(kube.events)
    before = scale_ups_counted()

    decision = tune(older, deps=deps, logger=LOG)

    assert decision is not None and decision.reason == Reason.SCALE_UP_REJECTIONS
    assert scale_ups_counted() == before
    assert [a.kind for a in kube.applies[writes:]] == [c.KIND]  # the refused status write only
    assert len(kube.events) == events
    assert service(kube)["status"]["tuning"] == newer
    assert deployment(kube)["spec"]["replicas"] == 2


def test_a_budget_change_lands_in_status_and_re_renders_the_deployment() -> None:
    kube, deps, body = served(TRAFFIC, **auto())  # TTFT has headroom: rule 3 opens the valve
    assert "64" in args(kube)
    before = len(kube.applies)
    decision = tune(body, deps=deps, logger=LOG)
    assert decision is not None and decision.reason == Reason.RAISE_QUEUE_REJECTIONS
    writes = [(a.kind, a.field_manager, a.subresource) for a in kube.applies[before:]]
    assert writes[:2] == [
        (c.KIND, c.FM_TUNER, "status"),  # the override first ...
        ("Deployment", c.FM_RENDERER, None),  # ... then the renderer renders it
    ]
    assert service(kube)["status"]["tuning"]["overrides"] == {"maxRequests": 128}
    flags = args(kube)
    assert flags[flags.index("--max-num-queued-reqs") + 1] == "128"
    assert "RaiseQueueRejections" in [e["reason"] for e in kube.events]


def test_recommend_mode_never_writes_the_deployment() -> None:
    # autoscaling off: the only lever Recommend could pull is a budget, which it only advises
    kube, deps, body = served(TRAFFIC, autoscaling={"enabled": False})
    before, deployment_before = len(kube.applies), deployment(kube)
    # at the replica cap a budget move waits for a window of the problem: the first pass says so
    waiting = tune(body, deps=deps, logger=LOG)
    assert waiting is not None and waiting.reason == Reason.RETUNE_AWAITS_WINDOW
    # the 503s have lasted the window (an hour ago, as status.tuning records it)
    since = (TRAFFIC.now - timedelta(hours=1)).isoformat()
    body = service(kube)
    body["status"]["tuning"]["problemSince"] = since
    before = len(kube.applies)
    decision = tune(body, deps=deps, logger=LOG)
    assert decision is not None and decision.reason == Reason.RAISE_QUEUE_REJECTIONS
    assert not decision.applied
    assert [a.kind for a in kube.applies[before:]] == [c.KIND]
    assert deployment(kube) == deployment_before
    assert "overrides" not in service(kube)["status"]["tuning"]
    event = kube.events[-1]
    assert event["reason"] == "RaiseQueueRejections"
    assert event["message"].endswith("(recommendation only)")


def test_holds_write_status_but_emit_no_event() -> None:
    kube, deps, _ = served(IDLE, **auto())
    events, before = len(kube.events), len(kube.applies)
    for _ in range(2):
        decision = tune(service(kube), deps=deps, logger=LOG)
        assert decision is not None and decision.action.kind == "Hold"
    assert len(kube.events) == events
    writes = [(a.kind, a.field_manager, a.subresource) for a in kube.applies[before:]]
    assert writes == [(c.KIND, c.FM_TUNER, "status")] * 2
    assert condition(service(kube), c.COND_TUNING_ACTIVE)["status"] == "True"


def test_the_log_tells_a_decision_once_and_not_its_repeats(caplog: Any) -> None:
    # idle: three passes vote (1 of 3, 2 of 3: one record refreshed), the third scales down
    kube, deps, _ = served(IDLE, **auto())
    decisions = []
    with caplog.at_level(logging.INFO, logger=LOG.name):
        for _ in range(3):
            decisions.append(tune(service(kube), deps=deps, logger=LOG))
    assert [d.reason.value for d in decisions if d is not None] == [
        "ScaleDownVoting", "ScaleDownVoting", "ScaleDownLowLoad"
    ]  # fmt: skip
    first, _, last = decisions
    assert first is not None and last is not None
    told = [r.getMessage() for r in caplog.records if r.name == LOG.name]
    assert told == [
        f"team-a/chat Hold ScaleDownVoting: {first.message}",
        f"team-a/chat ScaleReplicas ScaleDownLowLoad: {last.message}",
    ]


def test_the_tuners_status_leaves_the_reconciles_conditions_alone() -> None:
    kube, deps, body = served(IDLE, **auto())
    tune(body, deps=deps, logger=LOG)
    types = {x["type"] for x in service(kube)["status"]["conditions"]}
    assert {c.COND_READY, c.COND_TUNING_ACTIVE} <= types


def test_a_service_without_tuning_is_not_touched() -> None:
    kube = FakeKube()
    deps = deps_for(kube, TRAFFIC.now, TRAFFIC)
    body = serve(kube, example("minimal.yaml"), deps)
    writes = kube.writes
    assert tune(body, deps=deps, logger=LOG) is None
    assert kube.writes == writes


def _ready_pod(name: str, created: str, ready: str) -> dict[str, Any]:
    selector = dict(term.split("=", 1) for term in selector_for("chat").split(","))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-a", "labels": selector,
                     "creationTimestamp": created},
        "status": {"conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": ready},
        ]},
    }  # fmt: skip


def test_the_pods_ready_time_is_learned_from_their_conditions_into_status() -> None:
    kube, deps, body = served(IDLE)
    kube.put(_ready_pod("chat-a", "2026-01-01T00:00:00Z", "2026-01-01T00:03:20Z"))
    kube.put(_ready_pod("chat-b", "2026-01-01T00:10:00Z", "2026-01-01T00:12:00Z"))
    decision = tune(body, deps=deps, logger=LOG)
    assert decision is not None and decision.state.ready_time is not None
    tuning = service(kube)["status"]["tuning"]
    assert tuning["readyTime"]["seconds"] == 200.0  # the longer of 200 s and 120 s
    assert tuning["forecast"]["horizonSeconds"] == 200.0
    assert tuning["forecast"]["readyTimeSource"] == "learned"


def fake_prometheus(deps: Any) -> FakePrometheus:
    assert isinstance(deps.prometheus, FakePrometheus)
    return deps.prometheus


def test_a_pass_looks_one_period_back_with_one_range_query() -> None:
    _, deps, body = served(IDLE)
    assert tune(body, deps=deps, logger=LOG) is not None
    [(query, start, end, step)] = fake_prometheus(deps).range_calls
    assert "vllm:request_success_total" in query and step == "60s"
    assert (start, end) == past_span(IDLE.now, 86400.0)  # the default period: a day


def test_a_period_of_0s_asks_nothing_and_a_failed_look_back_costs_only_the_shape() -> None:
    _, deps, body = served(IDLE, autoscaling={"enabled": True, "maxReplicas": 4,
                                              "forecastPeriod": "0s"})  # fmt: skip
    assert tune(body, deps=deps, logger=LOG) is not None
    assert fake_prometheus(deps).range_calls == []
    _, deps, body = served(IDLE)
    plain = tune(body, deps=deps, logger=LOG)
    _, deps, body = served(IDLE)
    fake_prometheus(deps).past_raises = requests.ConnectionError("[Errno 111] Connection refused")
    failing = tune(body, deps=deps, logger=LOG)
    assert plain is not None and failing is not None
    assert (failing.reason, failing.action) == (plain.reason, plain.action)


def test_a_pass_looks_within_the_operators_budget_and_counts_it() -> None:
    """handlers/tune.py's decision under the look budget (tuning/look_budget.py): without CPU
    left the due look waits, with it the look is made and its CPU charged."""
    kube = FakeKube()
    deps = deps_for(kube, T0)
    svc = VLLMService.model_validate(
        {"metadata": {"name": "chat", "namespace": "team-a"}, "spec": BLOG_SPEC}
    )
    args = (svc, fleet(PODS, RATE), watched(PODS, RATE), T0, TuningSettings(), ())

    def counts() -> tuple[float, ...]:
        name = "vllm_operator_tuning_looks_total"
        return tuple(REGISTRY.get_sample_value(name, {"outcome": o}) or 0.0
                     for o in ("made", "deferred"))  # fmt: skip

    made, deferred = counts()
    deps.look_budget = LookBudget(0.001)
    deps.look_budget.charge(1.0)  # spent
    waits = decide_in_budget(deps, *args, LOG)
    assert waits.asks_look and waits.reason != Reason.RETUNE_FOR_FEWER_PODS
    assert counts() == (made, deferred + 1)
    deps.look_budget = LookBudget(0.001)
    looked = decide_in_budget(deps, *args, LOG)
    assert looked.state.fewer_pods_looked_at == T0 and not looked.asks_look
    assert counts() == (made + 1, deferred + 1)
    assert not deps.look_budget.take(T0)  # the look's CPU was charged
