"""k8s/client.py: the API client keeps a connection per thread that may use it at once."""

from __future__ import annotations

from pathlib import Path

from vllm_operator.k8s.client import API_CONNECTIONS, build_api_client

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_the_pool_keeps_a_connection_per_concurrent_request(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    api = build_api_client(str(path))
    assert api.configuration.host == "https://127.0.0.1:6443"
    assert api.rest_client.pool_manager.connection_pool_kw["maxsize"] == API_CONNECTIONS >= 24
    assert api.user_agent.startswith("vllm-operator/")
