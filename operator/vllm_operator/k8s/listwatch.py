"""Follow one kind of object as client-go's reflector does: a LIST, then a watch from the list's
resourceVersion, resumed from the last version seen (bookmarks included) each time the server
ends it, and a LIST again only after 410 Gone (the version compacted away). Other failures (the
API unreachable, a 403) are retried, later and later.

A watch opened without a version starts with every object again; one resumed from a version
sends only what changed since. The operator's pod and Deployment watches (handlers/pod_watch.py,
handlers/deployment_watch.py) and the scale benchmark's probes (bench/scale_probes.py) follow
their objects this way.
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


class ListWatchThread:
    """One kind of object, a namespace (None: all) and a label selector, followed on a daemon
    thread by list_and_watch: subclasses say what a LIST and an event mean to them."""

    api_version: str
    kind: str
    watch_seconds = 300  # the server ends a watch after this; it resumes from the last version

    def __init__(
        self,
        kube: KubeClient,
        namespace: str | None,
        selector: str,
        stop: threading.Event,
        backoff: Callable[[int], float],
        log: logging.Logger,
    ) -> None:
        self.kube, self.namespace, self.selector = kube, namespace, selector
        self.stop, self.backoff, self.log = stop, backoff, log

    def start(self) -> threading.Thread:
        # a daemon: a read waits for the server (up to watch_seconds) and must not hold the exit
        name = f"{self.kind.lower()}-watch-{self.namespace or 'all'}"
        thread = threading.Thread(target=self.run, name=name, daemon=True)
        thread.start()
        return thread

    def run(self) -> None:
        list_and_watch(
            self.kube, self.api_version, self.kind, self.namespace, self.selector,
            listed=self.listed, changed=self.changed, stop=self.stop,
            watch_seconds=self.watch_seconds, backoff=self.backoff, log=self.log,
        )  # fmt: skip

    def listed(self, objects: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def changed(self, type_: str, obj: dict[str, Any]) -> None:
        raise NotImplementedError
