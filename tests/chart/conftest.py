"""Fixtures of the chart tier."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.chart.image import build_image
from tests.chart.support import Helm, toolchain_bin
from tests.support.kube import ROOT, Cluster
from tests.support.operator import install_kopf_crds


@pytest.fixture(scope="session")
def helm_bin() -> Helm:
    """helm without a cluster: lint and template."""
    binary = toolchain_bin() / "helm"
    if not binary.exists():
        pytest.fail(f"{binary} missing: run `make toolchain`", pytrace=False)
    return Helm(binary)


@pytest.fixture(scope="session")
def operator_image() -> str:
    """The operator image of this tree, built or reused (cache keyed by its inputs)."""
    return build_image()


@pytest.fixture
def helm(cluster: Cluster, helm_bin: Helm) -> Helm:
    return Helm(helm_bin.binary, kubeconfig=cluster.kubeconfig)


@pytest.fixture
def new_namespace(cluster: Cluster) -> Iterator[Any]:
    """Factory of extra fresh namespaces (deleted afterwards), like the `namespace` fixture."""
    core = client.CoreV1Api(cluster.api)
    made: list[str] = []

    def make() -> str:
        name = f"t-{uuid.uuid4().hex[:10]}"
        core.create_namespace({"metadata": {"name": name, "labels": {"vllmop.test": "true"}}})
        made.append(name)
        return name

    yield make
    for name in made:
        core.delete_namespace(name, propagation_policy="Background")


@pytest.fixture
def current_crds(cluster: Cluster) -> None:
    """The VLLMService CRD of this tree, applied as the integration tier applies it.

    helm v4 server-side-applies crds/ on install; on this shared cluster the CRD may have been
    applied from an older tree by another session, and a field that differs would make helm's
    apply conflict. With the current CRD in place helm's apply agrees on every field; the
    forced apply also takes back fields an older helm install of another session may own."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    cluster.wait_established("vllmservices.serving.vllmop.io")


@pytest.fixture(scope="module")
def kopf_crds(cluster: Cluster) -> None:
    """The chart's kopf.dev peering CRDs (cluster-scoped, inert unless an operator peers)."""
    install_kopf_crds(cluster)
