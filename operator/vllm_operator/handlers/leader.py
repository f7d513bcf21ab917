"""One active writer for the operator-wide loops in HA mode, through a coordination Lease.

kopf's peering pauses the handlers of standby replicas, but not loops the operator runs itself
(drift resync, tuning); without a gate every replica would tune every service. The Lease is the
Kubernetes-native lock: whoever renewed it within `duration` holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kubernetes.client.exceptions import ApiException

from vllm_operator.api.durations import parse_kube_time
from vllm_operator.k8s.client import Kube

log = logging.getLogger("vllm_operator.leader")
LEASE_API = "coordination.k8s.io/v1"


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_is_free(lease: dict[str, Any], identity: str, now: datetime, duration: float) -> bool:
    """Ours already, never held, or not renewed within its duration (pure)."""
    spec = lease.get("spec") or {}
    holder, renewed = spec.get("holderIdentity"), spec.get("renewTime")
    if not holder or holder == identity or not renewed:
        return True
    last = parse_kube_time(renewed)
    # a renewTime nobody can read is not a live holder's: take the lease, as when never held
    return last is None or (now - last) > timedelta(seconds=duration)


@dataclass
class LeaseGate:
    kube: Kube
    namespace: str
    name: str
    identity: str
    duration: float = 30.0
    held: bool = False
    # called when this replica starts holding the lease (on the renewing thread): what was
    # not done while standing by is done then
    on_hold: Callable[[], None] | None = None

    def try_hold(self, now: datetime) -> bool:
        """Acquire or renew; False when another replica holds a live lease (or on a race)."""
        lease = self.kube.get(LEASE_API, "Lease", self.namespace, self.name)
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.duration),
            "renewTime": _stamp(now),
        }
        try:
            if lease is None:
                self.kube.create(
                    {
                        "apiVersion": LEASE_API,
                        "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace},
                        "spec": {**spec, "acquireTime": _stamp(now)},
                    }
                )
            elif lease_is_free(lease, self.identity, now, self.duration):
                # replace() carries resourceVersion: two replicas racing here, one gets a 409.
                self.kube.replace({**lease, "spec": {**lease.get("spec", {}), **spec}})
            else:
                self.held = False
                return False
        except ApiException as exc:
            if exc.status not in (409, 422):
                raise
            self.held = False
            return False
        starts = not self.held
        self.held = True
        if starts:
            log.info("holding lease %s/%s as %s", self.namespace, self.name, self.identity)
            if self.on_hold is not None:
                self.on_hold()
        return True

    def release(self, now: datetime) -> None:
        """Give the Lease up on a clean stop, as client-go's ReleaseOnCancel does: a standby
        takes it at its next try (within duration/3) instead of after `duration`."""
        if not self.held:
            return
        self.held = False  # the loops stop writing first
        lease = self.kube.get(LEASE_API, "Lease", self.namespace, self.name)
        spec = (lease or {}).get("spec") or {}
        if lease is None or spec.get("holderIdentity") != self.identity:
            return
        released = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1,
                    "renewTime": _stamp(now)}  # fmt: skip
        try:
            self.kube.replace({**lease, "spec": released})
        except ApiException as exc:  # taken meanwhile (409): nothing of ours to give up
            if exc.status != 409:
                raise
            return
        log.info("released lease %s/%s", self.namespace, self.name)

    async def keep(self, stop: asyncio.Event, clock: Any) -> None:
        """Renew every duration/3 until `stop`, then give the Lease up."""
        while not stop.is_set():
            try:
                await asyncio.to_thread(self.try_hold, clock())
            except Exception:  # an API blip: assume we lost it rather than write twice
                log.exception("lease renewal failed")
                self.held = False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.duration / 3)
        try:
            await asyncio.to_thread(self.release, clock())
        except Exception:  # it expires after `duration` anyway
            log.exception("cannot release lease %s/%s", self.namespace, self.name)
