"""The Kube of a pass on a copy of the service: reads, status and Events pass; nothing else."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.support.fake_kube import FakeKube
from vllm_operator.handlers.cached_parent import ChildWriteOnCopyError, StatusWritesOnly

DEP = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "chat",
       "namespace": "team-a"}, "spec": {"replicas": 1}}  # fmt: skip


def test_every_write_but_a_status_apply_is_refused_before_it_is_sent() -> None:
    inner = FakeKube()
    guarded = StatusWritesOnly(inner)
    with pytest.raises(ChildWriteOnCopyError, match="Deployment team-a/chat"):
        guarded.apply(DEP, field_manager="m")
    with pytest.raises(ChildWriteOnCopyError):
        guarded.create(DEP)
    with pytest.raises(ChildWriteOnCopyError):
        guarded.replace(DEP)
    with pytest.raises(ChildWriteOnCopyError, match="Service team-a/chat"):
        guarded.delete("v1", "Service", "team-a", "chat", uid="u")
    assert inner.writes == 0 and not inner.applies


def test_reads_status_applies_and_events_go_through() -> None:
    inner = FakeKube()
    inner.put(DEP)
    guarded = StatusWritesOnly(inner)
    assert guarded.get("apps/v1", "Deployment", "team-a", "chat") is not None
    assert len(guarded.list("apps/v1", "Deployment", "team-a")) == 1
    guarded.apply({**DEP, "status": {"replicas": 1}}, field_manager="m", subresource="status")
    now = datetime(2026, 12, 5, tzinfo=UTC)
    guarded.emit_event(DEP, type="Normal", reason="R", message="m", now=now)
    assert inner.writes == 2 and len(inner.events) == 1  # the status apply, the Event
