"""resourceVersions compared as KEP-5504 defines them, and the newest one a pass used
(k8s/versions.py)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import kopf
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.render_support import CFG, svc
from vllm_operator.k8s.versions import NewestCopies, NewestVersions, compare_resource_versions
from vllm_operator.main import on_vllmservice
from vllm_operator.render.memo import RenderMemo

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


@given(VERSIONS, VERSIONS)
def test_newest_of_is_the_noted_copy_only_when_it_is_newer(noted: int, mine: int) -> None:
    newest = NewestCopies()
    newest.note(deployment(str(noted)))
    got = newest.newest_of(deployment(str(mine)))
    assert got is not None
    assert got["metadata"]["resourceVersion"] == str(max(noted, mine))


@given(NOT_VERSIONS, VERSIONS)
def test_newest_of_keeps_an_object_whose_version_compares_with_nothing(
    bad: str, noted: int
) -> None:
    newest = NewestCopies()
    newest.note(deployment(str(noted)))
    assert newest.newest_of(deployment(bad)) == deployment(bad)
    assert newest.newest_of(deployment(None)) == deployment(None)
    assert newest.newest_of(None) is None
    assert newest.newest_of(deployment(str(noted + 1), name="other")) == deployment(
        str(noted + 1), name="other"
    )  # nothing noted of it


def test_a_forgotten_object_keeps_no_entry_and_no_copy_of_it_is_stale() -> None:
    newest = NewestVersions()
    newest.note(deployment("120"))
    newest.note(deployment("7", name="other"))
    newest.forget("team-a", "chat")
    newest.forget("team-a", "never-seen")  # nothing to drop: no error
    assert len(newest) == 1
    assert not newest.older_than_seen(deployment("3"))  # a recreated service starts afresh
    assert newest.older_than_seen(deployment("6", name="other"))


def test_the_event_handler_keeps_the_newest_copy_and_forgets_a_deleted_service() -> None:
    submitted: list[tuple[str, str]] = []
    spec_passes = SimpleNamespace(submit=lambda key, body: submitted.append(key))
    deps = SimpleNamespace(deployments=NewestVersions(), services=NewestCopies(),
                           renders=RenderMemo())  # fmt: skip
    memo = kopf.Memo(known=set(), deps=deps, spec_passes=spec_passes)
    deps.renders.render(svc({"metadata": {"name": "chat", "namespace": "team-a"}}), CFG)

    def event(kind: str | None, version: str) -> None:
        body = kopf.Body({"metadata": {**deployment(version)["metadata"], "generation": 1}})
        asyncio.run(on_vllmservice(body=body, type=kind, memo=memo))

    deps.deployments.note(deployment("120"))
    event(None, "300")  # the start-up listing
    event("MODIFIED", "290")  # delivered late: not kept
    assert deps.services.copy_of("team-a", "chat")["metadata"]["resourceVersion"] == "300"
    assert submitted == [("team-a", "chat"), ("team-a", "chat")]  # no status yet: unreconciled
    event("DELETED", "310")
    assert len(deps.deployments) == 0 and len(deps.services) == 0 and not memo.known
    assert len(deps.renders) == 0
    assert deps.services.copy_of("team-a", "chat") is None


def test_copies_are_kept_only_with_comparable_versions_and_given_out_as_deep_copies() -> None:
    copies = NewestCopies()
    copies.note(deployment("opaque-1"))
    assert copies.copy_of("team-a", "chat") is None  # newest cannot be told: read it instead
    copies.note(deployment("5", name="other"))
    given = copies.copy_of("team-a", "other")
    assert given is not None
    given["metadata"]["name"] = "changed"
    assert copies.copy_of("team-a", "other")["metadata"]["name"] == "other"  # type: ignore[index]


@given(st.lists(st.integers(min_value=1, max_value=10**6), min_size=1, max_size=30))
def test_the_copy_kept_is_the_one_with_the_greatest_version(versions: list[int]) -> None:
    copies = NewestCopies()
    for v in versions:
        copies.note({**deployment(str(v)), "seen": v})
    kept = copies.copy_of("team-a", "chat")
    assert kept is not None and kept["seen"] == max(versions)
