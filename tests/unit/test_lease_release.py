"""A replica that stops cleanly gives the loops' Lease up, so a standby takes it at its next try
instead of after the Lease's duration (handlers/leader.py)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes.client.exceptions import ApiException

from tests.support.fake_kube import FakeKube
from vllm_operator.handlers.leader import LEASE_API, LeaseGate

NOW = datetime(2026, 12, 5, 14, tzinfo=UTC)


def gates(kube: FakeKube) -> tuple[LeaseGate, LeaseGate]:
    return (
        LeaseGate(kube, "ops", "loops", identity="a", duration=30),
        LeaseGate(kube, "ops", "loops", identity="b", duration=30),
    )


def holder(kube: FakeKube) -> Any:
    lease = kube.get(LEASE_API, "Lease", "ops", "loops")
    assert lease is not None
    return lease["spec"]["holderIdentity"]


def test_a_released_lease_is_taken_at_the_standbys_next_try() -> None:
    kube = FakeKube()
    a, b = gates(kube)
    assert a.try_hold(NOW)
    assert not b.try_hold(NOW + timedelta(seconds=1))
    a.release(NOW + timedelta(seconds=2))
    assert not a.held and holder(kube) == ""
    assert b.try_hold(NOW + timedelta(seconds=3))  # not after 30 s: at once
    assert holder(kube) == "b"


def test_a_replica_releases_only_a_lease_it_holds() -> None:
    kube = FakeKube()
    a, b = gates(kube)
    assert a.try_hold(NOW)
    b.release(NOW)  # never held: writes nothing
    assert holder(kube) == "a"
    a.held = True
    assert b.try_hold(NOW + timedelta(seconds=40))  # a stalled; b took over
    a.release(NOW + timedelta(seconds=41))  # a still thinks it holds it: it must not free b's
    assert holder(kube) == "b" and not a.held


class Taken(FakeKube):
    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        raise ApiException(status=409, reason="Conflict")


def test_a_lease_taken_while_releasing_is_left_alone() -> None:
    kube = Taken()
    a, _ = gates(kube)
    assert a.try_hold(NOW)  # created, not replaced
    a.release(NOW + timedelta(seconds=1))
    assert not a.held and holder(kube) == "a"


def test_keep_releases_the_lease_when_stopped() -> None:
    kube = FakeKube()
    a, b = gates(kube)

    async def run() -> None:
        stop, holding = asyncio.Event(), asyncio.Event()
        loop = asyncio.get_running_loop()
        a.on_hold = lambda: loop.call_soon_threadsafe(holding.set)  # called on keep's thread
        keeping = asyncio.create_task(a.keep(stop, lambda: NOW))
        await holding.wait()
        stop.set()
        await keeping

    asyncio.run(run())
    assert not a.held and holder(kube) == ""
    assert b.try_hold(NOW + timedelta(seconds=1))
