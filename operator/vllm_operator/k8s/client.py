"""The only user of the `kubernetes` package: raw JSON requests, server-side apply, Events.

Requests go straight to the REST paths with dicts in and dicts out. That avoids the generated
models' (de)serialisation cost and the dynamic client's discovery round-trips, which matters when
one operator reconciles a thousand VLLMServices.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from vllm_operator import __version__
from vllm_operator import constants as c

# (apiVersion, kind) -> plural. Only what the operator reads or writes.
RESOURCES: dict[tuple[str, str], str] = {
    ("v1", "Service"): "services",
    ("v1", "Pod"): "pods",
    ("v1", "Node"): "nodes",
    ("v1", "Event"): "events",
    ("apps/v1", "Deployment"): "deployments",
    ("apps/v1", "ReplicaSet"): "replicasets",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitors",
    ("monitoring.coreos.com/v1", "PodMonitor"): "podmonitors",
    ("networking.k8s.io/v1", "NetworkPolicy"): "networkpolicies",
    ("coordination.k8s.io/v1", "Lease"): "leases",
    (c.API_VERSION, c.KIND): c.PLURAL,
}

APPLY = "application/apply-patch+yaml"
REQUEST_TIMEOUT = (5.0, 30.0)
API_CONNECTIONS = 48  # kept open: at least the threads that may send requests at once


class NotFoundError(Exception):
    """The object does not exist."""


class WatchExpiredError(Exception):
    """410 Gone: the resourceVersion a watch resumes from is compacted away; list again."""


def build_api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """In-cluster credentials when running in a pod, else the kubeconfig (file or $KUBECONFIG)."""
    cfg = client.Configuration()
    loaded = False
    if kubeconfig is None:
        try:
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
            loaded = True
        except config.ConfigException:
            pass
    if not loaded:
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
    # The client's default pool keeps 5 connections per core. The pass pools (main.py) and the
    # loops talk to the API server at once; a connection over the pool's size is closed after
    # its request, and the next one pays a new TLS handshake, on both sides.
    cfg.connection_pool_maxsize = API_CONNECTIONS
    return _named(client.ApiClient(cfg))


def _named(api: client.ApiClient) -> client.ApiClient:
    """Say who we are: audit logs and apiserver metrics then tell the operator's requests apart."""
    api.user_agent = f"vllm-operator/{__version__}"
    return api


def resource_path(
    api_version: str, kind: str, namespace: str | None, name: str | None = None
) -> str:
    try:
        plural = RESOURCES[(api_version, kind)]
    except KeyError:
        raise ValueError(f"vllm-operator does not manage {kind} ({api_version})") from None
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    path = f"{prefix}/namespaces/{namespace}/{plural}" if namespace else f"{prefix}/{plural}"
    return f"{path}/{name}" if name else path


def namespace_scopes(namespaces: tuple[str, ...]) -> tuple[str | None, ...]:
    """Each namespace the operator watches (`run -n`), or None alone: the whole cluster."""
    return namespaces or (None,)


class Kube(Protocol):
    """What the handlers need from the API server; KubeClient is the real one, the component
    tier's recording fake (tests/support/fake_kube.py) another."""

    writes: int  # requests that were not GETs, for the benchmark's "writes while idle" figure

    def get(
        self, api_version: str, kind: str, namespace: str, name: str
    ) -> dict[str, Any] | None: ...

    def list(
        self, api_version: str, kind: str, namespace: str | None, label_selector: str = ""
    ) -> list[dict[str, Any]]: ...

    def apply(
        self, obj: dict[str, Any], *, field_manager: str, subresource: str | None = None
    ) -> dict[str, Any]: ...

    def create(self, obj: dict[str, Any]) -> dict[str, Any]: ...

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]: ...

    def delete(
        self, api_version: str, kind: str, namespace: str, name: str, *, uid: str
    ) -> None: ...

    def emit_event(
        self, involved: dict[str, Any], *, type: str, reason: str, message: str, now: datetime
    ) -> None: ...


@dataclass
class KubeClient:
    api: client.ApiClient
    writes: int = 0  # counted for the benchmark's "writes while idle" figure

    def _send(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: list[tuple[str, str]] | None = None,
        content_type: str | None = None,
        timeout: tuple[float, float] = REQUEST_TIMEOUT,
    ) -> Any:
        """The response, its body not read yet (a watch streams it)."""
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        if method != "GET":
            self.writes += 1
        _method, url, headers, body, _ = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        return self.api.call_api(
            method, url, header_params=headers, body=body, _request_timeout=timeout
        )

    def _request(self, method: str, path: str, **send: Any) -> dict[str, Any]:
        """The answer's JSON; `send`: _send's keywords (body, query, content_type)."""
        resp = self._send(method, path, **send)
        data: bytes = resp.read()
        if resp.status == 404:
            raise NotFoundError(path)
        if resp.status >= 400:
            raise ApiException(http_resp=resp, body=data.decode(errors="replace"))
        result: dict[str, Any] = json.loads(data) if data else {}
        return result

    def list_at(
        self, api_version: str, kind: str, namespace: str | None, label_selector: str
    ) -> tuple[list[dict[str, Any]], str]:
        """The objects and the list's resourceVersion, for a watch to resume from."""
        query = [("labelSelector", label_selector)] if label_selector else []
        found = self._request("GET", resource_path(api_version, kind, namespace), query=query)
        for item in found["items"]:  # a list's items carry neither field
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return found["items"], str(found["metadata"]["resourceVersion"])

    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        label_selector: str,
        resource_version: str,
        timeout_seconds: int,
    ) -> Iterator[dict[str, Any]]:
        """The watch events ({type, object}) after `resource_version`, bookmarks included,
        until the server ends the watch after `timeout_seconds`. WatchExpiredError on 410 Gone."""
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if label_selector:
            query.append(("labelSelector", label_selector))
        path = resource_path(api_version, kind, namespace)
        resp = self._send("GET", path, query=query, timeout=(5.0, timeout_seconds + 30.0))
        if resp.status == 410:
            raise WatchExpiredError(path)
        if resp.status >= 400:
            raise ApiException(http_resp=resp, body=resp.read().decode(errors="replace"))
        stream = resp.response
        try:
            for line in iter_resp_lines(stream):  # type: ignore[no-untyped-call]
                if not line:
                    continue
                event: dict[str, Any] = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    if obj.get("code") == 410:
                        raise WatchExpiredError(path)
                    raise ApiException(status=obj.get("code"), reason=obj.get("message"))
                yield event
        finally:  # as the client's own Watch does: a stream left half-read is not pooled again
            stream.close()
            stream.release_conn()

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self._request("GET", resource_path(api_version, kind, namespace, name))
        except NotFoundError:
            return None

    def list(
        self, api_version: str, kind: str, namespace: str | None, label_selector: str = ""
    ) -> list[dict[str, Any]]:
        query = [("labelSelector", label_selector)] if label_selector else []
        items: list[dict[str, Any]] = self._request(
            "GET", resource_path(api_version, kind, namespace), query=query
        )["items"]
        return items

    def apply(
        self, obj: dict[str, Any], *, field_manager: str, subresource: str | None = None
    ) -> dict[str, Any]:
        """Server-side apply of `obj`, which must hold only the fields this manager owns."""
        meta = obj["metadata"]
        path = resource_path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        if subresource:
            path = f"{path}/{subresource}"
        return self._request(
            "PATCH",
            path,
            body=obj,
            query=[("fieldManager", field_manager), ("force", "true")],
            content_type=APPLY,
        )

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        path = resource_path(obj["apiVersion"], obj["kind"], meta.get("namespace"))
        return self._request("POST", path, body=obj)

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT: fails with 409 when obj's resourceVersion is no longer current."""
        meta = obj["metadata"]
        path = resource_path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        return self._request("PUT", path, body=obj)

    def delete(self, api_version: str, kind: str, namespace: str, name: str, *, uid: str) -> None:
        """DELETE the object if it is still the one with `uid` (a precondition: an object of
        the same name created since is left alone); gone already is success."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}}
        with contextlib.suppress(NotFoundError):
            self._request("DELETE", resource_path(api_version, kind, namespace, name), body=body)

    def emit_event(
        self,
        involved: dict[str, Any],
        *,
        type: str,
        reason: str,
        message: str,
        now: datetime,
    ) -> None:
        """A core/v1 Event on `involved`, as `kubectl describe` shows them."""
        meta = involved["metadata"]
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta['name']}.{uuid.uuid4().hex[:12]}",
                "namespace": meta["namespace"],
            },
            "involvedObject": {
                "apiVersion": involved["apiVersion"],
                "kind": involved["kind"],
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": type,
            "reason": reason,
            "message": message,
            "source": {"component": c.MANAGED_BY},
            "reportingComponent": c.MANAGED_BY,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        self._request("POST", resource_path("v1", "Event", meta["namespace"]), body=event)
