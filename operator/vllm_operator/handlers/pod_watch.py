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
from vllm_operator.k8s.client import KubeClient, namespace_scopes
from vllm_operator.k8s.listwatch import ListWatchThread
from vllm_operator.status.pods import PodTable, ServiceKey

log = logging.getLogger("vllm_operator.pod_watch")

SELECTOR = f"{c.LABEL_MANAGED_BY}={c.MANAGED_BY}"  # the operator's own objects


class PodWatch(ListWatchThread):
    """The operator's pods in one namespace (None: all), and a callback for news.

    `news(key)` is called, on the watch's thread, for a service with a pod that has just
    become stuck. Until the first LIST is in, `pods_of` says None: the status pass then lists
    the pods itself, as it does with no watch at all.
    """

    api_version, kind = "v1", "Pod"

    def __init__(
        self,
        kube: KubeClient,
        namespace: str | None,
        news: Callable[[ServiceKey], None],
        stop: threading.Event,
    ) -> None:
        super().__init__(kube, namespace, SELECTOR, stop, retry_delay, log)
        self.news = news
        self.table = PodTable()
        self.lock = threading.Lock()
        self.synced = False

    def pods_of(self, key: ServiceKey) -> list[dict[str, Any]] | None:
        with self.lock:
            return self.table.pods_of(key) if self.synced else None

    def listed(self, pods: list[dict[str, Any]]) -> None:
        with self.lock:
            news = self.table.replace(pods, self.namespace)
            self.synced = True
        self._tell(news)

    def changed(self, type_: str, pod: dict[str, Any]) -> None:
        with self.lock:
            news = self.table.apply(type_, pod)
        self._tell(news)

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
        self.watches = {ns: PodWatch(kube, ns, news, stop) for ns in namespace_scopes(namespaces)}

    def start(self) -> None:
        for watch in self.watches.values():
            watch.start()

    def pods_of(self, key: ServiceKey) -> list[dict[str, Any]] | None:
        watch = self.watches.get(key[0]) or self.watches.get(None)
        return watch.pods_of(key) if watch else None
