"""The operator's own watch of its pods, on a thread: a LIST, then a watch resumed from it.

kopf watched the pods before (an index and a handler for stuck pods), and ran its per-event
machinery (handler selection, per-object state, the filters, in the event loop) for each of the
five or so events of every pod: 3.4 CPU-s per 300 services while a fleet starts
(docs/operator-scale.md). Here an event is one JSON parse and a dict update in the PodTable
(status/pods.py), which keeps what status reads and says when to pass a service again. The
watch asks the API server for the operator's pods only (the managed-by label): kopf received
every pod of the watched namespaces and filtered on its side.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from vllm_operator import constants as c
from vllm_operator.handlers.passes import retry_delay
from vllm_operator.k8s.client import KubeClient, WatchExpiredError
from vllm_operator.status.pods import PodTable, ServiceKey

log = logging.getLogger("vllm_operator.pod_watch")

SELECTOR = f"{c.LABEL_MANAGED_BY}={c.MANAGED_BY}"
WATCH_SECONDS = 300  # the server ends a watch after this; it resumes from the last version


class PodWatch:
    """The operator's pods in one namespace (None: all), and a callback for news.

    `news(key)` is called, on the watch's thread, for a service with a pod that has just
    become stuck. Until the first LIST is in, `pods_of` says None: the status pass then lists
    the pods itself, as it does with no watch at all.
    """

    def __init__(
        self,
        kube: KubeClient,
        namespace: str | None,
        news: Callable[[ServiceKey], None],
        stop: threading.Event,
    ) -> None:
        self.kube, self.namespace, self.news, self.stop = kube, namespace, news, stop
        self.table = PodTable()
        self.lock = threading.Lock()
        self.synced = False

    def pods_of(self, key: ServiceKey) -> list[dict[str, Any]] | None:
        with self.lock:
            return self.table.pods_of(key) if self.synced else None

    def start(self) -> threading.Thread:
        # a daemon: a read waits for the server (up to WATCH_SECONDS) and must not hold the exit
        where = self.namespace or "all"
        thread = threading.Thread(target=self.run, name=f"pod-watch-{where}", daemon=True)
        thread.start()
        return thread

    def run(self) -> None:
        version: str | None = None  # None: list (again) before watching
        failures = 0
        while not self.stop.is_set():
            try:
                if version is None:
                    version = self._relist()
                version = self._follow(version)
                failures = 0
            except WatchExpiredError:
                log.info("pod watch of %s expired; listing again", self.namespace or "all")
                version = None
            except Exception as exc:  # the API unreachable, a 403: try again, later and later
                failures += 1
                delay = retry_delay(failures)
                log.warning("pod watch failed (%s); again in %.0fs", exc, delay)
                self.stop.wait(delay)

    def _relist(self) -> str:
        pods, version = self.kube.list_at("v1", "Pod", self.namespace, SELECTOR)
        with self.lock:
            news = self.table.replace(pods, self.namespace)
            self.synced = True
        self._tell(news)
        return version

    def _follow(self, version: str) -> str:
        """Apply the events of one watch; the version to resume from when it ends."""
        events = self.kube.watch("v1", "Pod", self.namespace, SELECTOR, version, WATCH_SECONDS)
        for event in events:
            obj = event["object"]
            version = str(obj.get("metadata", {}).get("resourceVersion") or version)
            if event["type"] == "BOOKMARK":
                continue
            with self.lock:
                news = self.table.apply(event["type"], obj)
            self._tell(news)
            if self.stop.is_set():
                break
        return version

    def _tell(self, keys: list[ServiceKey]) -> None:
        for key in keys:
            try:
                self.news(key)
            except Exception:  # a submit that fails must not end the watch
                log.exception("cannot pass %s/%s after its pod got stuck", *key)


class PodWatches:
    """One PodWatch per watched namespace (`run -n`), or one for the cluster."""

    def __init__(
        self,
        kube: KubeClient,
        namespaces: tuple[str, ...],
        news: Callable[[ServiceKey], None],
        stop: threading.Event,
    ) -> None:
        scopes: tuple[str | None, ...] = namespaces or (None,)
        self.watches = {ns: PodWatch(kube, ns, news, stop) for ns in scopes}

    def start(self) -> None:
        for watch in self.watches.values():
            watch.start()

    def pods_of(self, key: ServiceKey) -> list[dict[str, Any]] | None:
        watch = self.watches.get(key[0]) or self.watches.get(None)
        return watch.pods_of(key) if watch else None
