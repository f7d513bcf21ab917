"""The scale benchmark's watch: one LIST, then a watch resumed from the last version seen."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from typing import Any

from bench.scale_probes import ApiserverProfile, Watcher, audit_writes

from vllm_operator.k8s.client import WatchExpiredError


def _dep(name: str, version: int, available: int) -> dict[str, Any]:
    meta = {"name": name, "resourceVersion": str(version)}
    return {"metadata": meta, "spec": {"replicas": 2}, "status": {
        "availableReplicas": available, "updatedReplicas": available}}  # fmt: skip


class FakeKube:
    """Deployments only; the second watch ends in 410 Gone, the one after the relist stops."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop, self.lists, self.watched_from = stop, 0, []

    def list_at(self, api_version: str, kind: str, *_: Any) -> tuple[list[Any], str]:
        if kind != "Deployment":
            return [], "1"
        self.lists += 1
        return [_dep("a", 10, 0)], "10" if self.lists == 1 else "40"

    def watch(
        self, api_version: str, kind: str, _ns: Any, _sel: str, version: str, _t: int
    ) -> Iterator[dict[str, Any]]:
        if kind != "Deployment":
            self.stop.wait()
            return
        self.watched_from.append(version)
        if len(self.watched_from) == 1:
            yield {"type": "ADDED", "object": _dep("b", 20, 0)}
            yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "25"}}}
        elif len(self.watched_from) == 2:
            raise WatchExpiredError("deployments")
        else:
            yield {"type": "MODIFIED", "object": _dep("b", 41, 2)}
            self.stop.set()


def test_the_watch_resumes_from_the_last_version_and_lists_again_only_after_410() -> None:
    stop = threading.Event()
    kube = FakeKube(stop)
    watcher = Watcher(kube, "ns")  # type: ignore[arg-type]
    watcher.stop = stop
    watcher.start()
    for thread in watcher.threads:
        thread.join(timeout=30)
    assert kube.lists == 2
    assert kube.watched_from == ["10", "25", "40"]  # the bookmark's version, then the relist's
    assert set(watcher.created) == {("Deployment", "a"), ("Deployment", "b")}
    assert set(watcher.ready) == {("Deployment", "b")}
    assert watcher.created[("Deployment", "b")] <= watcher.ready[("Deployment", "b")]


class Answer:
    def __init__(self, status: int, data: bytes) -> None:
        self.status, self.data = status, data

    def read(self) -> bytes:
        return self.data


class ProfilingKube:
    def __init__(self, answer: Answer | Exception) -> None:
        self.answer = answer
        self.asked: list[Any] = []

    def _send(self, method: str, path: str, **kw: Any) -> Answer:
        self.asked.append((method, path, kw["query"]))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_a_profile_is_written_where_asked_and_a_refusal_is_reported(tmp_path: Any) -> None:
    kube = ProfilingKube(Answer(200, b"pprof"))
    sampler = ApiserverProfile(kube, 40, tmp_path / "p" / "raw-1.pb.gz")  # type: ignore[arg-type]
    sampler.start()
    assert sampler.wait() == tmp_path / "p" / "raw-1.pb.gz"
    assert (tmp_path / "p" / "raw-1.pb.gz").read_bytes() == b"pprof"
    assert kube.asked == [("GET", "/debug/pprof/profile", [("seconds", "40")])]

    refused = ApiserverProfile(ProfilingKube(Answer(403, b"forbidden")), 5, tmp_path / "x")  # type: ignore[arg-type]
    refused.start()
    assert refused.wait() is None and refused.error is not None and "403" in refused.error
    down = ApiserverProfile(ProfilingKube(OSError("refused")), 5, tmp_path / "y")  # type: ignore[arg-type]
    down.start()
    assert down.wait() is None and down.error == "OSError: refused"


def _audit_line(namespace: str, verb: str, agent: str = "vllm-operator/0.1") -> str:
    ref = {"namespace": namespace, "resource": "vllmservices", "subresource": "status"}
    event = {"stage": "ResponseComplete", "verb": verb, "userAgent": agent, "objectRef": ref}
    return json.dumps(event, separators=(",", ":")) + "\n"


def test_audit_writes_count_the_backups_the_log_rotated_to_during_the_run(tmp_path: Any) -> None:
    old = tmp_path / "audit-2026-12-05T01-00-00.000.log"
    old.write_text(_audit_line("bench-a", "patch") * 5)
    os.utime(old, (1000.0, 1000.0))  # rotated before the run began: not read
    rotated = tmp_path / "audit-2026-12-05T02-35-04.157.log"
    rotated.write_text(_audit_line("bench-a", "patch") * 2 + _audit_line("other", "patch"))
    os.utime(rotated, (3000.0, 3000.0))
    (tmp_path / "audit.log").write_text(_audit_line("bench-a", "create"))
    counts = audit_writes(tmp_path / "audit.log", "bench-a", since=2000.0)
    assert counts == {
        "vllm-operator patch vllmservices/status": 2,
        "vllm-operator create vllmservices/status": 1,
    }
