"""query_snapshot against a real Prometheus scraping a real twin, and the real client's failures.

Prometheus (the Debian `prometheus` binary) scrapes one twin every second through file-SD, with
the target labelled by the e2e harness's build_sd_target, i.e. as a PodMonitor with
podTargetLabels labels it. Counters are pre-created at 0 and traffic starts only after the first
scrape, so over a window that holds all samples the rejection ratio Prometheus computes equals the
one the twin's own counters give.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.wait import wait_until
from vllm_operator import constants as c
from vllm_operator.config import OperatorConfig
from vllm_operator.metrics.prometheus import QueryFailure, build_prometheus, query_snapshot
from vllm_operator.metrics.queries import build_selector
from vllm_twin.harness.targets import build_sd_target

ROOT = Path(__file__).resolve().parents[2]
MODEL = "Qwen/Qwen2.5-7B-Instruct"
NS, NAME, POD = "team-a", "chat", "chat-6d5f8b7c9-x2x4q"
SEL = build_selector(NS, NAME)
WINDOW = 120.0  # longer than the test: every sample Prometheus holds is in the window


def pod_object(pod: str, canary: bool = False) -> dict[str, Any]:
    """The fields of a VLLMService pod that build_sd_target reads."""
    labels = {c.LABEL_SERVICE: NAME, c.LABEL_INSTANCE: NAME}
    if canary:
        labels[c.LABEL_CANARY] = "true"
    return {
        "metadata": {"namespace": NS, "name": pod, "labels": labels},
        "spec": {"containers": [{"name": "vllm"}]},
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def http_status(url: str, body: dict[str, Any] | None = None) -> int:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except OSError:
        return 0  # not listening yet


def counter_sum(metrics_text: str, name: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics_text.splitlines()
        if line.startswith(name + "{")
    )


@dataclass(frozen=True)
class Twin:
    proc: subprocess.Popen[bytes]
    base: str
    port: int


@contextmanager
def running_twin(tmp: Path, log_name: str = "twin.log") -> Iterator[Twin]:
    port = free_port()
    argv = [sys.executable, "-m", "vllm_twin.cli", "twin", MODEL, "--port", str(port)]
    argv += ["--max-num-queued-reqs", "2"]
    with (tmp / log_name).open("wb") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: http_status(f"{base}/health") == 200, timeout=20, what="twin /health")
        yield Twin(proc, base, port)
    finally:
        stop(proc)


@dataclass(frozen=True)
class Prometheus:
    proc: subprocess.Popen[bytes]
    url: str


@contextmanager
def running_prometheus(
    tmp: Path, pods: dict[str, int], canaries: frozenset[str] = frozenset()
) -> Iterator[Prometheus]:
    """Prometheus scraping each pod's twin (pod name -> port) every second."""
    port = free_port()
    targets = [
        t
        for pod, twin in pods.items()
        for t in build_sd_target(pod_object(pod, canary=pod in canaries), twin)
    ]
    (tmp / "targets.json").write_text(json.dumps(targets))
    (tmp / "prometheus.yml").write_text(
        json.dumps(  # JSON is YAML
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "scrape_configs": [
                    {
                        "job_name": "vllm",
                        "file_sd_configs": [{"files": [str(tmp / "targets.json")]}],
                    }
                ],
            }
        )
    )
    argv = [
        "prometheus",
        f"--config.file={tmp / 'prometheus.yml'}",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--storage.tsdb.path={tmp / 'data'}",
        "--log.level=warn",
    ]
    with (tmp / "prometheus.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: http_status(f"{url}/-/ready") == 200, timeout=20, what="/-/ready")
        yield Prometheus(proc, url)
    finally:
        stop(proc)


def instant(prom: Any, query: str) -> float | None:
    result = prom.custom_query(query)
    return float(result[0]["value"][1]) if result else None


def send_bursts(base: str, bursts: int, size: int) -> list[int]:
    """`bursts` rounds of `size` concurrent completions; with a queue cap of 2, most get 503."""
    body = {"model": MODEL, "prompt": "one two three four five six", "max_tokens": 40}
    codes: list[int] = []
    with ThreadPoolExecutor(size) as pool:
        for _ in range(bursts):
            codes += pool.map(lambda _: http_status(f"{base}/v1/completions", body), range(size))
    return codes


def test_snapshot_from_a_real_prometheus_scraping_a_twin(tmp_path: Path) -> None:
    with running_twin(tmp_path) as t, running_prometheus(tmp_path, {POD: t.port}) as p:
        twin = t.base
        prom = build_prometheus(OperatorConfig(prometheus_url=p.url, prometheus_timeout_seconds=5))
        # The first scrape records every counter at 0 before any request.
        wait_until(
            lambda: instant(prom, f"sum(vllm:request_success_total{SEL})") == 0,
            timeout=20,
            what="the first scrape of the twin",
        )
        codes = send_bursts(twin, bursts=3, size=6)
        assert 503 in codes and 200 in codes, codes
        with urllib.request.urlopen(f"{twin}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        rejected = counter_sum(text, "vllm:admission_rejections_total")
        finished = counter_sum(text, "vllm:request_success_total")
        assert (rejected, finished) == (codes.count(503), codes.count(200))
        wait_until(
            lambda: (
                instant(prom, f"sum(vllm:admission_rejections_total{SEL})") == rejected
                and instant(prom, f"sum(vllm:request_success_total{SEL})") == finished
            ),
            timeout=20,
            what="Prometheus to hold the twin's final counters",
        )

        failures: list[QueryFailure] = []
        snap = query_snapshot(
            prom,
            NS,
            NAME,
            window=WINDOW,
            now=datetime.now(UTC),
            expected_pods=1,
            fleet=None,
            stale_after=10,
            on_error=failures.append,
        )
        assert (snap.quality, snap.problem, failures) == ("ok", None, [])
        assert (snap.pods_expected, snap.pods_scraped) == (1, 1)
        assert [(x.pod, x.up) for x in snap.pods] == [(POD, True)]
        assert snap.request_rate is not None and snap.request_rate > 0
        # rate() extrapolates each series by the same factor (same scrape times), so ratios are
        # exact while the absolute rate may exceed increase/window by up to half a scrape.
        assert snap.request_rate * WINDOW == pytest.approx(rejected + finished, rel=0.5)
        assert snap.rejection_ratio == pytest.approx(rejected / (rejected + finished), rel=1e-6)
        assert snap.rejection_rate_by_reason["max_num_queued_tokens"] == 0
        assert snap.ttft_p95 is not None and snap.ttft_p95 > 0
        assert snap.e2e_p95 is not None and snap.e2e_p95 > 0
        assert snap.prompt_tokens_per_request == pytest.approx(6)
        assert snap.sample_age is not None and snap.sample_age < 10

        stop(p.proc)
        down = query_snapshot(
            prom,
            NS,
            NAME,
            window=WINDOW,
            now=datetime.now(UTC),
            expected_pods=1,
            fleet=None,
            stale_after=10,
            on_error=failures.append,
        )
        assert down.quality == "error"
        assert down.problem == (
            f"Prometheus at {p.url} cannot be reached (query for pod_up):"
            " [Errno 111] Connection refused."
        )
        assert [(f.figure, f.kind) for f in failures] == [("pod_up", "connection")]


@contextmanager
def stub_prometheus(status: int, body: bytes, hold: threading.Event | None = None) -> Iterator[str]:
    """An HTTP server answering every /api/v1/query with `body`, or not at all until `hold`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if hold is not None:
                hold.wait(timeout=30)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (the timeout test): nothing left to answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        if hold is not None:
            hold.set()
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(
    ("status", "body", "kind", "problem"),
    [
        (
            503,
            b"overloaded",
            "http",
            "refused the query (query for pod_up): HTTP Status Code 503 (b'overloaded').",
        ),
        (
            400,
            b'{"status":"error","errorType":"bad_data","error":"parse error"}',
            "http",
            "refused the query (query for pod_up): HTTP Status Code 400"
            ' (b\'{"status":"error","errorType":"bad_data","error":"parse error"}\').',
        ),
        (
            200,
            b"<html>not json</html>",
            "response",
            "gave an answer that is not an instant vector (query for pod_up):"
            " Expecting value: line 1 column 1 (char 0).",
        ),
        (
            200,
            b'{"status":"success","data":{"resultType":"scalar","result":[1.5,"2"]}}',
            "response",
            "gave an answer that is not an instant vector (query for pod_up):"
            " expected an instant vector, got a scalar [1.5, '2'].",
        ),
    ],
    ids=["5xx", "bad-query", "not-json", "scalar"],
)
def test_answers_that_are_not_vectors_are_errors(
    status: int, body: bytes, kind: str, problem: str
) -> None:
    with stub_prometheus(status, body) as url:
        failures: list[QueryFailure] = []
        snap = query_snapshot(
            build_prometheus(OperatorConfig(prometheus_url=url)),
            NS,
            NAME,
            window=WINDOW,
            now=datetime.now(UTC),
            expected_pods=1,
            fleet=None,
            stale_after=10,
            on_error=failures.append,
        )
    assert (snap.quality, snap.problem) == ("error", f"Prometheus at {url} {problem}")
    assert [(f.figure, f.kind) for f in failures] == [("pod_up", kind)]


def test_a_prometheus_that_does_not_answer_times_out() -> None:
    with stub_prometheus(200, b"", hold=threading.Event()) as url:
        cfg = OperatorConfig(prometheus_url=url, prometheus_timeout_seconds=0.3)
        snap = query_snapshot(
            build_prometheus(cfg),
            NS,
            NAME,
            window=WINDOW,
            now=datetime.now(UTC),
            expected_pods=1,
            fleet=None,
            stale_after=10,
        )
    assert snap.quality == "error"
    assert snap.problem is not None
    assert snap.problem.startswith(f"Prometheus at {url} did not answer in time (query for pod_up)")
    assert "Read timed out. (read timeout=0.3)" in snap.problem
