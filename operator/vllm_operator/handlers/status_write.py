"""The one rule for VLLMService status writes: none lands on a status newer than its own read.

Several passes of one service write status: the reconcile (field manager vllm-operator-status)
from the create, resync, Deployment-event and pod-event passes, and the tuner (its memory,
status.tuning). Each prepares its write from a read of the VLLMService. A server-side apply with
no precondition lets the last writer win, so a write prepared from an older read, or one the API
server commits late (held up in an etcd restart while a newer pass wrote), would put an older
observedGeneration, Ready or tuner memory back. So every status write carries the
resourceVersion it was prepared from: the API server refuses it (409) when anything wrote the
object since, and the writer prepares it again from a fresh read (`StaleReadError`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException

from vllm_operator import constants as c
from vllm_operator.k8s.client import Kube

# Preparations of one write in a row that find the service changed since their read; after
# this many a reconcile pass fails (the pass queue retries it with back-off) and a tuner write
# is dropped.
STALE_ATTEMPTS = 3


class StaleReadError(Exception):
    """The VLLMService changed after the read a status write was prepared from."""


def apply_status(
    kube: Kube, read: dict[str, Any], patch: dict[str, Any], *, field_manager: str
) -> dict[str, Any]:
    """Apply `patch` (a status-subresource apply) only if `read` is still the stored object."""
    version = read["metadata"].get("resourceVersion")
    meta = {**patch["metadata"], **({"resourceVersion": version} if version else {})}
    try:
        return kube.apply({**patch, "metadata": meta}, field_manager=field_manager,
                          subresource="status")  # fmt: skip
    except ApiException as exc:
        # force=true settles field-manager conflicts, so a 409 here is the precondition
        if exc.status == 409:
            raise StaleReadError(
                f"{meta.get('namespace')}/{meta['name']} changed since read"
            ) from exc
        raise


def tuner_read_holds(read: dict[str, Any], fresh: dict[str, Any]) -> bool:
    """Whether a tuner write prepared from `read` may still go onto `fresh` (pure).

    The tuner decided from the spec (generation) and its memory (status.tuning) it read; a write
    by anyone else touches neither (the reconcile owns other status fields). If either moved, a
    newer spec or a newer tuner's pass (an HA handover) came in between, and this write is older.
    """

    def basis(obj: dict[str, Any]) -> tuple[Any, Any]:
        return obj["metadata"].get("generation"), (obj.get("status") or {}).get("tuning")

    return basis(read) == basis(fresh)


def retry_on_stale_read(
    kube: Kube, body: dict[str, Any], attempt: Callable[[dict[str, Any], bool], None]
) -> None:
    """`attempt(body, False)`; on StaleReadError, `attempt(fresh, True)` on a fresh read of the
    service, STALE_ATTEMPTS in all. A service gone or being deleted meanwhile ends it."""
    meta = body["metadata"]
    read, again = body, False
    for n in range(1, STALE_ATTEMPTS + 1):
        try:
            attempt(read, again)
            return
        except StaleReadError:
            if n == STALE_ATTEMPTS:
                raise
        fresh = kube.get(c.API_VERSION, c.KIND, meta["namespace"], meta["name"])
        if fresh is None or fresh["metadata"].get("deletionTimestamp"):
            return
        read, again = fresh, True
