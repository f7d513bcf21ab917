"""API timestamps: one parser for status, pods and leases (api/durations.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_operator.api.durations import parse_kube_time
from vllm_operator.handlers.leader import lease_is_free

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


@settings(derandomize=True, max_examples=200, deadline=None)
@given(
    st.datetimes(datetime(1970, 1, 1), datetime(9999, 12, 31), timezones=st.just(UTC)),
    st.booleans(),
)
def test_what_the_api_server_writes_reads_back(when: datetime, micro: bool) -> None:
    # metav1.Time is whole seconds, MicroTime (leases, events) six digits; both end in Z
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")
    expected = when if micro else when.replace(microsecond=0)
    assert parse_kube_time(stamp) == expected


@settings(derandomize=True, max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=40), st.none(), st.integers(), st.floats()))
def test_anything_else_is_unknown_not_a_crash(value: object) -> None:
    parsed = parse_kube_time(value)
    assert parsed is None or parsed.tzinfo is not None


def test_a_stamp_without_a_zone_is_unknown() -> None:
    # an aware time cannot be compared with a naive one: "unknown" is the honest answer
    assert parse_kube_time("2026-12-01T10:00:00") is None


def lease(holder: str | None, renewed: str | None) -> dict[str, object]:
    return {"spec": {"holderIdentity": holder, "renewTime": renewed}}


def test_a_lease_renewed_within_its_duration_is_held() -> None:
    renewed = (NOW - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert not lease_is_free(lease("other", renewed), "me", NOW, 30)
    assert lease_is_free(lease("other", renewed), "me", NOW + timedelta(seconds=40), 30)


def test_a_lease_whose_renew_time_nobody_can_read_is_free() -> None:
    # before, a malformed renewTime raised in the leader loop on every try
    assert lease_is_free(lease("other", "yesterday"), "me", NOW, 30)
