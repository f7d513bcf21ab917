"""A budget change on a canary pod (spec.autotune.canary), through handlers/tune.py and the
reconcile, against the recording fake API server and per-pod-group Prometheus answers.

The recording is team-a/chat with 503s at 62% and TTFT p95 39 ms on 2 pods, so rule 3 opens the
entry valve (maxRequests 64 -> 128). The canary's own answers are the same recording with one
figure changed: TTFT p95 0.9 s (a harmful change) or a 503 ratio near zero (a good one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from tests.component.handlers import (
    LOG,
    Killed,
    deployment,
    deps_for,
    die_at_write,
    example,
    serve,
    service,
)
from tests.component.test_rollout_strategy import node, other_pod
from tests.support.fake_kube import FakeKube
from tests.unit.metrics.fake import Recording, load
from vllm_operator import constants as c
from vllm_operator.handlers.tune import tune
from vllm_operator.metrics.queries import PodGroup, build_snapshot_queries
from vllm_operator.render.canary import canary_name
from vllm_operator.render.rollout import ONE_DOWN, SURGE
from vllm_operator.tuning.reasons import Reason

TRAFFIC = load("traffic-two-pods.json")
SLO = {"ttftP95": "500ms", "itlP95": "50ms", "maxRejectionRatio": 0.02}
AUTO = {
    "mode": "Auto",
    "bounds": {"maxRequests": {"min": 16, "max": 256}},
    "maxRestartsPerHour": 2,
    "canary": True,
}


@dataclass
class GroupedPrometheus:
    """Answers each pod group's queries from its own recording."""

    by_group: dict[PodGroup, Recording]
    calls: list[str] = field(default_factory=list)

    def custom_query(self, query: str, params: dict[str, Any] | None = None) -> Any:
        self.calls.append(query)
        for group, rec in self.by_group.items():
            queries = build_snapshot_queries(rec.namespace, rec.name, rec.window, group)
            for figure, known in queries.items():
                if known == query:
                    return rec.responses[figure]["data"]["result"]
        raise AssertionError(f"unexpected query {query}")


def flag(dep: dict[str, Any], name: str) -> str | None:
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    return args[args.index(name) + 1] if name in args else None


def canary_of(kube: FakeKube) -> dict[str, Any] | None:
    return kube.get("apps/v1", "Deployment", "team-a", canary_name("chat"))


def run_canary(on_canary: Recording) -> tuple[FakeKube, Any]:
    """Serve, start the canary, make its pod ready, then judge it 10 minutes later."""
    kube = FakeKube()
    deps = deps_for(kube, TRAFFIC.now)
    deps.prometheus = GroupedPrometheus({"all": TRAFFIC, "stable": TRAFFIC, "canary": on_canary})
    serve(kube, example("autotune-recommend.yaml", replicas=2, slo=SLO, autotune=AUTO), deps)
    started = tune(service(kube), deps=deps, logger=LOG)
    assert started is not None and started.reason == Reason.CANARY_STARTED, started
    # the stable pods keep their flags; one canary pod runs the raised valve
    assert flag(deployment(kube), "--max-num-queued-reqs") == "64"
    canary = canary_of(kube)
    assert canary is not None and flag(canary, "--max-num-queued-reqs") == "128"
    assert canary["spec"]["replicas"] == 1
    assert canary["spec"]["template"]["metadata"]["labels"][c.LABEL_CANARY] == "true"
    assert service(kube)["status"]["tuning"]["canary"]["toValue"] == 128
    kube.set_status("apps/v1", "Deployment", "team-a", canary_name("chat"), {"readyReplicas": 1})
    deps.clock = lambda: TRAFFIC.now + timedelta(seconds=10)
    waiting = tune(service(kube), deps=deps, logger=LOG)
    assert waiting is not None and waiting.reason == Reason.CANARY_JUDGING
    assert "judged in" in waiting.message
    deps.clock = lambda: TRAFFIC.now + timedelta(seconds=600)
    return kube, deps


def test_a_harmful_canary_is_removed_and_the_stable_pods_never_ran_it() -> None:
    slow = TRAFFIC.with_values("ttft_p95", {"": "0.9"})
    kube, deps = run_canary(slow)
    judged = tune(service(kube), deps=deps, logger=LOG)
    assert judged is not None and judged.reason == Reason.CANARY_REMOVED
    assert canary_of(kube) is None  # deleted by the re-render
    assert flag(deployment(kube), "--max-num-queued-reqs") == "64"
    tuning = service(kube)["status"]["tuning"]
    assert "canary" not in tuning and "overrides" not in tuning
    assert [(h["field"], h["direction"]) for h in tuning["holds"]] == [("maxRequests", "up")]
    (event,) = [e for e in kube.events if e["reason"] == "CanaryRemoved"]
    assert "ttft_p95 0.90s on the canary vs 39ms on the stable pods" in event["message"]


def test_a_canary_no_worse_than_the_stable_pods_is_promoted_to_every_pod() -> None:
    # the canary admits what it gets: 0.25 req/s served (30 in the window), 0.4% refused
    calm = TRAFFIC.with_values("admitted_rate", {"": "0.25"}).with_values(
        "rejection_rate_by_reason", {"max_num_queued_reqs": "0.001"}, label="reason"
    )
    kube, deps = run_canary(calm)
    judged = tune(service(kube), deps=deps, logger=LOG)
    assert judged is not None and judged.reason == Reason.CANARY_PROMOTED, judged
    assert canary_of(kube) is None
    assert flag(deployment(kube), "--max-num-queued-reqs") == "128"
    tuning = service(kube)["status"]["tuning"]
    assert tuning["overrides"] == {"maxRequests": 128} and "canary" not in tuning
    (event,) = [e for e in kube.events if e["reason"] == "CanaryPromoted"]
    assert "on the canary vs" in event["message"]


def promote_on_a_full_node(other_gpus: int, canary_bound: bool) -> FakeKube:
    """A canary promoted on one H100 node of 8 GPUs: the 2 stable pods, the canary pod when
    `canary_bound`, and someone else's pod of `other_gpus` on it."""
    calm = TRAFFIC.with_values("admitted_rate", {"": "0.25"}).with_values(
        "rejection_rate_by_reason", {"max_num_queued_reqs": "0.001"}, label="reason"
    )
    kube, deps = run_canary(calm)
    kube.put(node())
    kube.put(other_pod(other_gpus))
    stable = deployment(kube)["spec"]["template"]["metadata"]["labels"]
    canary = canary_of(kube)
    assert canary is not None
    labels = [stable, stable] + ([canary["spec"]["template"]["metadata"]["labels"]] * canary_bound)
    for n, pod_labels in enumerate(labels):
        kube.put(bound_pod(f"chat-{n}", pod_labels))
    judged = tune(service(kube), deps=deps, logger=LOG)
    assert judged is not None and judged.reason == Reason.CANARY_PROMOTED, judged
    assert canary_of(kube) is None
    assert flag(deployment(kube), "--max-num-queued-reqs") == "128"
    return kube


def test_a_promotion_surges_onto_the_canarys_gpu_when_no_other_is_free() -> None:
    kube = promote_on_a_full_node(other_gpus=5, canary_bound=True)
    # the canary's GPU is the surge pod's: no stable pod stops while the new ones load
    assert deployment(kube)["spec"]["strategy"] == SURGE
    assert not [e for e in kube.events if e["reason"] == c.REASON_NO_SPARE_GPU]


def test_without_a_canary_leaving_a_full_node_still_rolls_pod_by_pod() -> None:
    """The node full without the canary's pod: no surge room is invented."""
    kube = promote_on_a_full_node(other_gpus=6, canary_bound=False)
    assert deployment(kube)["spec"]["strategy"] == ONE_DOWN


def bound_pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """A pod of the service (stable or canary by its labels) bound to the node, one GPU."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-a", "labels": dict(labels)},
        "spec": {
            "nodeName": "gpu-h100-0",
            "containers": [{"name": "vllm", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
        },
        "status": {"phase": "Running"},
    }


def test_a_canary_its_pass_recorded_and_never_created_is_created_by_the_next_pass(
    monkeypatch: Any,
) -> None:
    # the pass that starts the canary dies after its record, before its Event and re-render
    # (tests/component/test_tune_handler.py): the next pass creates the canary Deployment
    kube = FakeKube()
    deps = deps_for(kube, TRAFFIC.now)
    deps.prometheus = GroupedPrometheus({"all": TRAFFIC, "stable": TRAFFIC, "canary": TRAFFIC})
    serve(kube, example("autotune-recommend.yaml", replicas=2, slo=SLO, autotune=AUTO), deps)
    with monkeypatch.context() as m:
        die_at_write(kube, m, 1)
        with pytest.raises(Killed):
            tune(service(kube), deps=deps, logger=LOG)
    assert service(kube)["status"]["tuning"]["canary"]["toValue"] == 128
    assert canary_of(kube) is None

    deps.clock = lambda: TRAFFIC.now + timedelta(seconds=10)
    waiting = tune(service(kube), deps=deps, logger=LOG)

    assert waiting is not None and waiting.reason == Reason.CANARY_JUDGING
    canary = canary_of(kube)
    assert canary is not None and flag(canary, "--max-num-queued-reqs") == "128"
    assert flag(deployment(kube), "--max-num-queued-reqs") == "64"  # the stable pods keep theirs
