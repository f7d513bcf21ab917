"""Follow one kind of object as client-go's reflector does: a LIST, then a watch from the list's
resourceVersion, resumed from the last version seen (bookmarks included) each time the server
ends it, and a LIST again only after 410 Gone (the version compacted away). Other failures (the
API unreachable, a 403) are retried, later and later.

A watch opened without a version starts with every object again; one resumed from a version
sends only what changed since. The operator's pod watch (handlers/pod_watch.py) and the scale
benchmark's probes (bench/scale_probes.py) follow their objects this way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from vllm_operator.k8s.client import KubeClient, WatchExpiredError


def list_and_watch(
    kube: KubeClient,
    api_version: str,
    kind: str,
    namespace: str | None,
    selector: str,
    *,
    listed: Callable[[list[dict[str, Any]]], None],
    changed: Callable[[str, dict[str, Any]], None],
    stop: threading.Event,
    watch_seconds: int,
    backoff: Callable[[int], float],
    log: logging.Logger,
) -> None:
    """Until `stop` is set: `listed(objects)` after each LIST, `changed(type, object)` for each
    watch event but bookmarks. `backoff(n)`: the seconds to wait after the n-th failure in a row.
    """
    where = f"{kind} in {namespace or 'all namespaces'}"
    version: str | None = None  # None: list (again) before watching
    failures = 0
    while not stop.is_set():
        try:
            if version is None:
                objects, version = kube.list_at(api_version, kind, namespace, selector)
                listed(objects)
            events = kube.watch(api_version, kind, namespace, selector, version, watch_seconds)
            for event in events:
                obj = event["object"]
                version = str(obj.get("metadata", {}).get("resourceVersion") or version)
                if event["type"] != "BOOKMARK":
                    changed(event["type"], obj)
                if stop.is_set():
                    break
            failures = 0
        except WatchExpiredError:
            log.info("watch of %s expired; listing again", where)
            version = None
        except Exception as exc:  # the API unreachable, a 403: try again, later and later
            failures += 1
            delay = backoff(failures)
            log.warning("watch of %s failed (%s); again in %.0fs", where, exc, delay)
            stop.wait(delay)
