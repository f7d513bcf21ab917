"""VLLMService objects on the live cluster, as the chart tier's tests create and watch them."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Protocol

from kubernetes import client, watch

from tests.support.kube import Cluster

GROUP, VERSION, PLURAL = "serving.vllmop.io", "v1alpha1", "vllmservices"


class HasLog(Protocol):
    def log(self) -> str: ...


def create(cluster: Cluster, obj: dict[str, Any]) -> dict[str, Any]:
    api = client.CustomObjectsApi(cluster.api)
    ns = obj["metadata"]["namespace"]
    created: dict[str, Any] = api.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, obj)
    return created


def versions_until(
    cluster: Cluster,
    since: dict[str, Any],
    done: Callable[[dict[str, Any]], bool],
    op: HasLog,
    timeout: int = 90,
) -> list[dict[str, Any]]:
    """Every version the API server stores after `since` (an object as returned by a write),
    up to the first one that is `done`. A watch from that resourceVersion sees each write, so a
    state one operator writes is seen even if another overwrites it a moment later."""
    api = client.CustomObjectsApi(cluster.api)
    meta = since["metadata"]
    seen: list[dict[str, Any]] = []
    w = watch.Watch()
    for event in w.stream(
        api.list_namespaced_custom_object,
        GROUP,
        VERSION,
        meta["namespace"],
        PLURAL,
        field_selector=f"metadata.name={meta['name']}",
        resource_version=meta["resourceVersion"],
        timeout_seconds=timeout,
    ):
        seen.append(copy.deepcopy(event["object"]))
        if done(event["object"]):
            w.stop()
            return seen
    raise AssertionError(
        f"{meta['namespace']}/{meta['name']}: no final state in {timeout}s; saw {seen[-1:]!r}\n"
        f"operator log:\n{op.log()[-4000:]}"
    )
