"""The real API server refuses a status write prepared from an older read (status_write.py)."""

from __future__ import annotations

import pytest

from tests.support.kube import Cluster
from tests.support.operator import install_crds
from vllm_operator import constants as c
from vllm_operator.handlers.status_write import StaleReadError, apply_status
from vllm_operator.k8s.client import KubeClient

pytestmark = pytest.mark.integration


def test_a_status_apply_from_an_older_read_is_refused(cluster: Cluster, namespace: str) -> None:
    install_crds(cluster)
    kube = KubeClient(cluster.api)
    meta = {"name": "chat", "namespace": namespace}
    spec = {"model": "Qwen/Qwen2.5-7B-Instruct", "gpu": {"type": "H100-80GB"}}
    kube.create({"apiVersion": c.API_VERSION, "kind": c.KIND, "metadata": meta, "spec": spec})
    read = kube.get(c.API_VERSION, c.KIND, namespace, "chat")
    assert read is not None

    def patch(generation: int) -> dict[str, object]:
        status = {"observedGeneration": generation}
        return {"apiVersion": c.API_VERSION, "kind": c.KIND, "metadata": meta, "status": status}

    newer = apply_status(kube, read, patch(2), field_manager=c.FM_STATUS)  # the read is current
    with pytest.raises(StaleReadError):
        apply_status(kube, read, patch(1), field_manager="someone-else")
    stored = kube.get(c.API_VERSION, c.KIND, namespace, "chat")
    assert stored is not None and stored["status"]["observedGeneration"] == 2
    # the read that is current again goes through
    apply_status(kube, newer, patch(3), field_manager=c.FM_STATUS)
