"""resourceVersions compared as KEP-5504 defines them, and the newest one a pass used
(k8s/versions.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from vllm_operator.k8s.versions import NewestVersions, compare_resource_versions

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
