"""The operator's own watch of its Deployments, on a thread: a LIST, then a watch resumed from it.

A Deployment's rollout progress is what `Ready` and `Progressing` report, so each of its events
gets its service a status pass at once (docs/reliability.md). kopf watched the Deployments
before and ran its per-event machinery in its event loop for the five or so events of every
Deployment as a fleet starts: with the VLLMService watch, the largest part of the operator's CPU
per 300 services (docs/operator-scale.md, "Where the remaining time goes"). Here an event is
one JSON parse and a submit, and a LIST is made again only after 410 Gone.

The first LIST passes nothing: the VLLMService watch passes every service it sees first
(main.py), and that pass reads its Deployment (one that changed between that read and the
LIST is seen by the resync). A LIST after 410 passes every service with a Deployment, since
events were missed in between; a Deployment deleted in between is recreated by the resync.

The watch keeps the newest Deployment of each service (`newest`): a standby replica (HA) that
starts holding the operator's Lease passes every service with them (main.py), since the events
it saw while standing by passed nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from vllm_operator import constants as c
from vllm_operator.handlers.passes import retry_delay
from vllm_operator.handlers.pod_watch import SELECTOR
from vllm_operator.k8s.client import KubeClient, namespace_scopes
from vllm_operator.k8s.listwatch import ListWatchThread
from vllm_operator.status.pods import ServiceKey

log = logging.getLogger("vllm_operator.deployment_watch")

# A service's Deployment changed: (namespace, service), and the Deployment (None: deleted)
Changed = Callable[[ServiceKey, dict[str, Any] | None], None]


def service_of(deployment: dict[str, Any]) -> ServiceKey | None:
    """The service whose status a Deployment's event concerns; None for a canary (its progress
    is the tuner's to read, handlers/canary.py) or a Deployment without its service's label."""
    meta = deployment.get("metadata") or {}
    labels = meta.get("labels") or {}
    parent, namespace = labels.get(c.LABEL_SERVICE), meta.get("namespace")
    if not parent or not namespace or c.LABEL_CANARY in labels:
        return None
    return namespace, parent


class DeploymentWatch(ListWatchThread):
    """The operator's Deployments in one namespace (None: all); `changed` is called on the
    watch's thread."""

    api_version, kind = "apps/v1", "Deployment"

    def __init__(
        self, kube: KubeClient, namespace: str | None, changed: Changed, stop: threading.Event
    ) -> None:
        super().__init__(kube, namespace, SELECTOR, stop, retry_delay, log)
        self.on_change = changed
        self.lists = 0
        self.lock = threading.Lock()
        self._newest: dict[ServiceKey, dict[str, Any]] = {}

    def newest(self) -> list[tuple[ServiceKey, dict[str, Any]]]:
        """Each service's Deployment as last listed or changed."""
        with self.lock:
            return list(self._newest.items())

    def listed(self, deployments: list[dict[str, Any]]) -> None:
        self.lists += 1
        keyed = {key: d for d in deployments if (key := service_of(d)) is not None}
        with self.lock:
            self._newest = keyed
        if self.lists > 1:  # a relist after 410: what changed in between is not known
            for key, deployment in keyed.items():
                self._tell(key, deployment)

    def changed(self, type_: str, deployment: dict[str, Any]) -> None:
        key = service_of(deployment)
        if key is None:
            return
        now = None if type_ == "DELETED" else deployment
        with self.lock:
            if now is None:
                self._newest.pop(key, None)
            else:
                self._newest[key] = now
        self._tell(key, now)

    def _tell(self, key: ServiceKey, now: dict[str, Any] | None) -> None:
        try:
            self.on_change(key, now)
        except Exception:  # a submit that fails must not end the watch
            log.exception("cannot pass %s/%s after its Deployment changed", *key)


def start_deployment_watches(
    kube: KubeClient, namespaces: tuple[str, ...], changed: Changed, stop: threading.Event
) -> list[DeploymentWatch]:
    """One watch per watched namespace (`run -n`), or one for the cluster, started."""
    watches = [DeploymentWatch(kube, ns, changed, stop) for ns in namespace_scopes(namespaces)]
    for watch in watches:
        watch.start()
    return watches
