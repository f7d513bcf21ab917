"""resourceVersions compared as KEP-5504 defines them, and the newest one a pass used
(k8s/versions.py)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import kopf
from hypothesis import given
from hypothesis import strategies as st

from vllm_operator.k8s.versions import NewestVersions, compare_resource_versions
from vllm_operator.main import on_vllmservice

VERSIONS = st.integers(min_value=1, max_value=10**30)
NOT_VERSIONS = st.sampled_from(["", "0", "007", "12a", "-3", "1.5", " 12", "١٢"])


@given(VERSIONS, VERSIONS)
def test_two_versions_compare_as_the_integers_they_spell(a: int, b: int) -> None:
    assert compare_resource_versions(str(a), str(b)) == (a > b) - (a < b)


@given(NOT_VERSIONS, VERSIONS)
def test_anything_else_compares_with_nothing(bad: str, good: int) -> None:
    assert compare_resource_versions(bad, str(good)) is None
    assert compare_resource_versions(str(good), bad) is None


def deployment(version: str | None, name: str = "chat") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "team-a"}
    if version is not None:
        meta["resourceVersion"] = version
    return {"metadata": meta}


def test_a_copy_older_than_one_noted_is_stale_and_the_newest_is_kept() -> None:
    newest = NewestVersions()
    newest.note(deployment("120"))
    newest.note(deployment("99"))  # noted late: does not replace the newer one
    assert newest.older_than_seen(deployment("119"))
    assert not newest.older_than_seen(deployment("120"))
    assert not newest.older_than_seen(deployment("1000"))
    assert not newest.older_than_seen(deployment("5", name="other"))  # another object


def test_without_a_comparable_version_nothing_is_stale() -> None:
    newest = NewestVersions()
    newest.note(deployment("opaque-2"))
    newest.note(None)
    assert not newest.older_than_seen(deployment("opaque-1"))
    assert not newest.older_than_seen(deployment(None))
    assert not newest.older_than_seen(None)
    newest.note(deployment("7"))
    assert not newest.older_than_seen(deployment("opaque-1"))


def test_a_forgotten_object_keeps_no_entry_and_no_copy_of_it_is_stale() -> None:
    newest = NewestVersions()
    newest.note(deployment("120"))
    newest.note(deployment("7", name="other"))
    newest.forget("team-a", "chat")
    newest.forget("team-a", "never-seen")  # nothing to drop: no error
    assert len(newest) == 1
    assert not newest.older_than_seen(deployment("3"))  # a recreated service starts afresh
    assert newest.older_than_seen(deployment("6", name="other"))


def test_a_deleted_service_is_forgotten_by_the_event_handler() -> None:
    newest = NewestVersions()
    newest.note(deployment("120"))
    memo = kopf.Memo(known={("team-a", "chat")}, deps=SimpleNamespace(deployments=newest))
    body = kopf.Body({"metadata": {"name": "chat", "namespace": "team-a"}})
    asyncio.run(on_vllmservice(body=body, type="DELETED", memo=memo))
    assert len(newest) == 0 and not memo.known
