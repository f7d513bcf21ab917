"""What the handler component tests share: a VLLMService served by a FakeKube, and Deps on it."""

from __future__ import annotations

import copy
import itertools
import logging
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from tests.support.fake_kube import FakeKube
from tests.unit.metrics.fake import FakePrometheus, Recording
from vllm_operator import constants as c
from vllm_operator.config import OperatorConfig
from vllm_operator.handlers.deps import Deps
from vllm_operator.handlers.reconcile import reconcile

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LOG = logging.getLogger("component")
# the recordings in tests/fixtures/prometheus are of team-a/chat over a 2-minute window
NAMESPACE, NAME = "team-a", "chat"


def example(file: str, **spec: Any) -> dict[str, Any]:
    """examples/`file` as team-a/chat, with `spec` keys replaced."""
    obj: dict[str, Any] = yaml.safe_load((EXAMPLES / file).read_text())
    obj["metadata"] = {"name": NAME, "namespace": NAMESPACE}
    obj["spec"].update(copy.deepcopy(spec))
    return obj


def deps_for(kube: FakeKube, now: datetime, recording: Recording | None = None) -> Deps:
    return Deps(
        cfg=OperatorConfig(metrics_window="2m"),
        kube=kube,
        prometheus=FakePrometheus(recording) if recording is not None else None,
        clock=lambda: now,
    )


def service(kube: FakeKube) -> dict[str, Any]:
    body = kube.get(c.API_VERSION, c.KIND, NAMESPACE, NAME)
    assert body is not None
    return body


def deployment(kube: FakeKube) -> dict[str, Any]:
    dep = kube.get("apps/v1", "Deployment", NAMESPACE, NAME)
    assert dep is not None
    return dep


def roll_out(kube: FakeKube) -> None:
    """The Deployment controller's report once every pod of the current spec is ready."""
    dep = deployment(kube)
    n = int(dep["spec"].get("replicas", 1))
    kube.set_status("apps/v1", "Deployment", NAMESPACE, NAME, {
        "observedGeneration": dep["metadata"]["generation"],
        "replicas": n, "updatedReplicas": n, "readyReplicas": n, "availableReplicas": n,
    })  # fmt: skip


def serve(kube: FakeKube, obj: dict[str, Any], deps: Deps) -> dict[str, Any]:
    """Create `obj`, reconcile it, roll the Deployment out, reconcile again: a Ready service."""
    kube.put(obj)
    reconcile(service(kube), deps=deps, logger=LOG)
    roll_out(kube)
    reconcile(service(kube), deps=deps, logger=LOG)
    return service(kube)


def condition(body: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(x for x in body["status"]["conditions"] if x["type"] == type_)


class Killed(BaseException):
    """The operator SIGKILLed between two writes of a pass (tests/faults/test_ha.py)."""


def die_at_write(kube: FakeKube, monkeypatch: Any, n: int) -> None:
    """The operator dies as it makes the pass's write number `n` (0: the first): that write and
    every one after it never happen."""
    made = itertools.count()

    def dying(write: Any) -> Any:
        def wrapped(*args: Any, **kw: Any) -> Any:
            if next(made) >= n:
                raise Killed
            return write(*args, **kw)

        return wrapped

    monkeypatch.setattr(kube, "apply", dying(kube.apply))
    monkeypatch.setattr(kube, "emit_event", dying(kube.emit_event))
