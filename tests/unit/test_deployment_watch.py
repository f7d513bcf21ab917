"""handlers/deployment_watch.py: which Deployment events pass which service, and what a LIST
passes (the LIST, the resumed watch and the 410 themselves are in test_pod_watch.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from vllm_operator import constants as c
from vllm_operator.handlers.deployment_watch import DeploymentWatch, service_of
from vllm_operator.handlers.pod_watch import SELECTOR
from vllm_operator.k8s.client import WatchExpiredError


def deployment(name: str, version: str, *, canary: bool = False, parent: bool = True) -> dict:
    labels = {c.LABEL_MANAGED_BY: c.MANAGED_BY}
    if parent:
        labels[c.LABEL_SERVICE] = name
    if canary:
        labels[c.LABEL_CANARY] = "true"
    meta = {"name": name, "namespace": "team-a", "labels": labels, "resourceVersion": version}
    return {"metadata": meta, "status": {"availableReplicas": 1}}


class ScriptedKube:
    """LIST, a watch that ends in 410, a second LIST, an empty watch; then the test stops."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop, self.asked = stop, []

    def list_at(self, api_version: str, kind: str, ns: str, selector: str) -> tuple[list, str]:
        self.asked.append(("list", api_version, kind, ns, selector))
        if len([a for a in self.asked if a[0] == "list"]) == 1:
            return [deployment("chat", "5"), deployment("code", "6")], "6"
        return [deployment("chat", "9"), deployment("chat-canary", "9", canary=True)], "9"

    def watch(self, *args: Any) -> Iterator[dict[str, Any]]:
        self.asked.append(("watch", *args))
        if args[4] == "6":
            yield {"type": "MODIFIED", "object": deployment("chat", "7")}
            yield {"type": "MODIFIED", "object": deployment("chat-canary", "7", canary=True)}
            yield {"type": "ADDED", "object": deployment("orphan", "7", parent=False)}
            yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "8"}}}
            yield {"type": "DELETED", "object": deployment("code", "8")}
            raise WatchExpiredError("410 Gone")
        self.stop.set()


def test_events_pass_their_service_and_only_a_relist_passes_what_it_lists() -> None:
    stop = threading.Event()
    kube = ScriptedKube(stop)
    passed: list[tuple[tuple[str, str], str | None]] = []

    def changed(key: tuple[str, str], now: dict[str, Any] | None) -> None:
        passed.append((key, None if now is None else now["metadata"]["resourceVersion"]))

    DeploymentWatch(kube, "team-a", changed, stop).run()  # type: ignore[arg-type]

    assert passed == [
        # the first LIST passes nothing: the VLLMService watch passes every service it first sees
        (("team-a", "chat"), "7"),  # the canary's event and the unlabelled one pass nothing
        (("team-a", "code"), None),  # deleted: the pass finds it gone
        (("team-a", "chat"), "9"),  # the relist after 410: events may have been missed
    ]
    assert [a[:5] for a in kube.asked if a[0] == "list"] == [
        ("list", "apps/v1", "Deployment", "team-a", SELECTOR)
    ] * 2


def test_a_failing_submit_does_not_end_the_watch() -> None:
    stop = threading.Event()
    kube = ScriptedKube(stop)
    calls: list[tuple[str, str]] = []

    def changed(key: tuple[str, str], _now: dict[str, Any] | None) -> None:
        calls.append(key)
        raise RuntimeError("queue shut down")

    DeploymentWatch(kube, "team-a", changed, stop).run()  # type: ignore[arg-type]
    assert len(calls) == 3 and stop.is_set()


def test_the_service_of_a_deployment_is_its_label_in_its_namespace() -> None:
    assert service_of(deployment("chat", "1")) == ("team-a", "chat")
    assert service_of(deployment("chat-canary", "1", canary=True)) is None
    assert service_of(deployment("x", "1", parent=False)) is None
    assert service_of({"metadata": {"labels": {c.LABEL_SERVICE: "chat"}}}) is None  # no namespace
    assert service_of({}) is None


def test_the_watch_keeps_each_services_newest_deployment() -> None:
    stop = threading.Event()
    watch = DeploymentWatch(ScriptedKube(stop), "team-a", lambda *_: None, stop)  # type: ignore[arg-type]
    watch.listed([deployment("chat", "5"), deployment("chat-canary", "5", canary=True)])
    watch.changed("MODIFIED", deployment("chat", "6"))
    watch.changed("ADDED", deployment("code", "6"))
    watch.changed("DELETED", deployment("code", "7"))
    watch.changed("ADDED", deployment("orphan", "7", parent=False))
    assert [(k, d["metadata"]["resourceVersion"]) for k, d in watch.newest()] == [
        (("team-a", "chat"), "6")
    ]
    watch.listed([deployment("docs", "9")])  # a relist replaces what was kept
    assert [k for k, _ in watch.newest()] == [("team-a", "docs")]
