"""The VLLMServices fault tests load the cluster with, and the user's side of creating them."""

from __future__ import annotations

import threading
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.faults.specs import tuned_spec
from tests.support.invariants import GROUP, PLURAL, VERSION
from tests.support.kube import Cluster


def tuned_service(namespace: str, name: str, gpu: str = "H100-80GB", **spec: Any) -> dict[str, Any]:
    """The VLLMService of tuned_spec (tests/faults/specs.py) under `name`."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "VLLMService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": tuned_spec(gpu, **spec),
    }


class Creator:
    """Creates services one after another in a thread, retrying through an outage as a GitOps
    controller would; `created` counts the ones the API server confirmed (409 included: a create
    whose answer was lost in the outage)."""

    def __init__(self, cluster: Cluster, objs: list[dict[str, Any]]) -> None:
        self.api = client.CustomObjectsApi(cluster.api)
        self.objs = objs
        self.created = 0
        self.retries = 0
        self.done = threading.Event()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Creator:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=30)

    def _run(self) -> None:
        for obj in self.objs:
            ns = obj["metadata"]["namespace"]
            while True:
                try:
                    self.api.create_namespaced_custom_object(
                        GROUP, VERSION, ns, PLURAL, obj, _request_timeout=10
                    )
                    break
                except ApiException as exc:
                    if exc.status == 409:
                        break
                    self.retries += 1
                except Exception:  # connection refused or timed out: the fault under test
                    self.retries += 1
                if self.stopped.wait(0.5):  # back off before the next try
                    return
            self.created += 1
        self.done.set()
