"""handlers/pod_watch.py over k8s/client.py against an HTTP server that plays the API's part:
a LIST, a watch resumed from its version and from bookmarks, and a relist after 410 Gone."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from tests.unit.test_pod_table import pod
from vllm_operator import constants as c
from vllm_operator.handlers.pod_watch import SELECTOR, PodWatch
from vllm_operator.k8s.client import KubeClient, build_api_client

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""


def at(obj: dict[str, Any], version: str) -> dict[str, Any]:
    obj["metadata"]["resourceVersion"] = version
    return obj


# (watch?, resourceVersion asked) -> the answer: a LIST body, or the lines of a watch
SCRIPT: dict[tuple[bool, str], Any] = {
    (False, ""): {"items": [pod("chat-1", "pending")], "metadata": {"resourceVersion": "10"}},
    (True, "10"): [
        {"type": "MODIFIED", "object": at(pod("chat-1", "unschedulable"), "11")},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}},
    ],  # then the server ends the watch (its timeout): resume from the bookmark
    (True, "12"): [{"type": "ERROR", "object": {"kind": "Status", "code": 410}}],
    (False, "relist"): {
        "items": [pod("chat-1", "unschedulable"), pod("chat-2", "crash-loop")],
        "metadata": {"resourceVersion": "20"},
    },
    (True, "20"): [],  # the test ends here
}


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[KubeClient, list[tuple[bool, str]], threading.Event]]:
    asked: list[tuple[bool, str]] = []
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            watching = query.get("watch") == "true"
            key = (watching, query.get("resourceVersion", "relist" if asked else ""))
            asked.append(key)
            answer = SCRIPT.get(key) if query.get("labelSelector") == SELECTOR else None
            if key == (True, "20") or answer is None:
                stop.set()  # the end of the script, or a request it did not expect
            if answer is None:
                self.send_response(500)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            lines = answer if watching else [answer]
            self.wfile.write(b"".join(json.dumps(x).encode() + b"\n" for x in lines))

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG.format(port=server.server_address[1]))
    try:
        yield KubeClient(build_api_client(str(path))), asked, stop
    finally:
        server.shutdown()


def test_the_watch_resumes_from_bookmarks_and_lists_again_after_410(
    api: tuple[KubeClient, list[tuple[bool, str]], threading.Event],
) -> None:
    kube, asked, stop = api
    news: list[tuple[str, str]] = []
    watch = PodWatch(kube, "team-a", news.append, stop)
    assert watch.pods_of(("team-a", "chat")) is None  # not listed yet: passes list themselves
    watch.run()  # returns once the script's last watch is asked for
    assert asked == [(False, ""), (True, "10"), (True, "12"), (False, "relist"), (True, "20")]
    # chat-1 became stuck in the watch, chat-2 while the watch was gone (the relist found it)
    assert news == [("team-a", "chat"), ("team-a", "chat")]
    pods = watch.pods_of(("team-a", "chat")) or []
    assert sorted(p["metadata"]["name"] for p in pods) == ["chat-1", "chat-2"]
    assert all(c.LABEL_SERVICE not in str(p) for p in pods)
