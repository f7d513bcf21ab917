"""What the operator scale benchmark observes: watch timings, audit-log writes, /proc CPU."""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from vllm_operator import constants as c
from vllm_operator.handlers.passes import retry_delay
from vllm_operator.k8s.client import KubeClient
from vllm_operator.k8s.listwatch import list_and_watch

LOG = logging.getLogger("bench.scale_probes")
WATCHED = (("apps/v1", "Deployment"), ("v1", "Service"), (c.API_VERSION, c.KIND))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def component_pid(name: str) -> int:
    return int((Path(os.environ["VLLMOP_KWOK_CLUSTER_DIR"]) / "pids" / f"{name}.pid").read_text())


# apiserver_request_total: every request served, by verb and resource (summed over codes, scopes)
# apiserver_watch_events_total: events sent to watchers, by resource
_COUNTED = ("apiserver_request_total", "apiserver_watch_events_total")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_counts(text: str) -> dict[str, float]:
    """The API server's request and watch-event counters from its /metrics, as
    "VERB resource[/subresource]" and "watch events resource" (a label missing counts as "")."""
    counts: dict[str, float] = {}
    for line in text.splitlines():
        name, _, rest = line.partition("{")
        if name not in _COUNTED:
            continue
        labels_text, _, value = rest.rpartition("} ")
        labels = dict(_LABEL.findall(labels_text))
        resource = labels.get("resource", "")
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        key = (
            f"{labels.get('verb', '')} {resource}"
            if name == _COUNTED[0]
            else f"watch events {resource}"
        )
        counts[key] = counts.get(key, 0.0) + float(value)
    return counts


def count_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    """What was served between two readings (counters only grow; keys new in `after` too)."""
    delta = {k: round(v - before.get(k, 0.0)) for k, v in after.items()}
    return {k: v for k, v in sorted(delta.items()) if v}


def read_counts(kube: KubeClient) -> dict[str, float]:
    """The API server's counters now (its /metrics; the bench's kubeconfig may read it)."""
    resp = kube._send("GET", "/metrics", timeout=(5.0, 60.0))
    return parse_counts(resp.read().decode())


def audit_writes(audit_log: Path, namespace: str, since: float = 0.0) -> dict[str, int]:
    """Writes to objects in `namespace`, by user agent, verb and resource (the audit log).

    The API server rotates its audit log at 100 MB (`audit-<time>.log` beside it), which a
    1,000-service arm crosses: the backups written to since `since` (a wall-clock time before
    the namespace was created) are read too.
    """
    backups = audit_log.parent.glob(f"{audit_log.stem}-*{audit_log.suffix}")
    files = [*sorted(b for b in backups if b.stat().st_mtime >= since), audit_log]
    counts: dict[str, int] = {}
    for path in files:
        with path.open() as f:
            for line in f:
                if f'"namespace":"{namespace}"' in line:
                    _count_write(counts, json.loads(line), namespace)
    return counts


def _count_write(counts: dict[str, int], event: dict[str, Any], namespace: str) -> None:
    ref = event.get("objectRef") or {}
    if ref.get("namespace") != namespace or event.get("stage") != "ResponseComplete":
        return
    agent = event.get("userAgent", "?").split(" ")[0].split("/")[0]
    key = f"{agent} {event['verb']} {ref.get('resource')}/{ref.get('subresource', '')}"
    counts[key] = counts.get(key, 0) + 1


class Watcher:
    """Monotonic times at which each object was first seen, first available / Ready."""

    def __init__(self, kube: KubeClient, ns: str) -> None:
        self.kube, self.ns, self.stop = kube, ns, threading.Event()
        self.created: dict[tuple[str, str], float] = {}
        self.ready: dict[tuple[str, str], float] = {}
        self.threads = [
            threading.Thread(target=self._watch, args=(av, kind), daemon=True)
            for av, kind in WATCHED
        ]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _watch(self, api_version: str, kind: str) -> None:
        """One LIST, then a watch resumed from the last version seen (k8s/listwatch.py).

        The earlier probe reopened its watch every 5 s without a version, and each reopening
        re-sent every object of the namespace (300-1,000 of them, 3 KB for a VLLMService), to
        the API server's bill of whichever arm ran longer.
        """
        list_and_watch(
            self.kube, api_version, kind, self.ns, "",
            listed=lambda objs: self._saw(kind, objs),
            changed=lambda _type, obj: self._saw(kind, [obj]),
            stop=self.stop, watch_seconds=60, backoff=retry_delay, log=LOG,
        )  # fmt: skip

    def _saw(self, kind: str, objs: list[dict[str, Any]]) -> None:
        now = time.monotonic()
        for obj in objs:
            key = (kind, obj["metadata"]["name"])
            self.created.setdefault(key, now)
            if key not in self.ready and is_ready(kind, obj):
                self.ready[key] = now

    def count(self, kind: str, table: dict[tuple[str, str], float]) -> int:
        return sum(1 for k in list(table) if k[0] == kind)


def is_ready(kind: str, obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    if kind == "Deployment":
        want = int((obj.get("spec") or {}).get("replicas", 1))
        return (
            int(status.get("availableReplicas") or 0) >= want
            and int(status.get("updatedReplicas") or 0) >= want
        )
    if kind == c.KIND:
        conds = status.get("conditions") or []
        return any(x.get("type") == "Ready" and x.get("status") == "True" for x in conds)
    return False


class ApiserverProfile:
    """A CPU profile of kube-apiserver (its /debug/pprof, on by default) over a fixed window
    from the first apply of an arm: the same length for both arms, so the profiles compare."""

    def __init__(self, kube: KubeClient, seconds: int, where: Path) -> None:
        self.kube, self.seconds, self.where = kube, seconds, where
        self.thread = threading.Thread(target=self._fetch, daemon=True)
        self.error: str | None = None

    def start(self) -> None:
        self.thread.start()

    def _fetch(self) -> None:
        query = [("seconds", str(self.seconds))]
        try:
            resp = self.kube._send("GET", "/debug/pprof/profile", query=query,
                                   timeout=(5.0, self.seconds + 60.0))  # fmt: skip
            data = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}: {data[:200]!r}")
            self.where.parent.mkdir(parents=True, exist_ok=True)
            self.where.write_bytes(data)
        except Exception as exc:  # reported with the run; the run's other figures stand
            self.error = f"{type(exc).__name__}: {exc}"

    def wait(self) -> Path | None:
        self.thread.join()
        return None if self.error else self.where
