"""What kube-apiserver spent its CPU on during an arm, from its pprof CPU profile.

`go tool pprof -traces` reads the profile; each distinct stack goes to the first class, in the
order of CLASSES, that one of its frames names (so the encoding of a watch event counts as the
watch's, and the schema walk of an apply as the apply's). The classes are a reading aid, not
a cost model: a frame's name says what the code is, not which client's request it serves.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from bench.scale_probes import ApiserverProfile

CLASSES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("watch: events to watchers", (
        "storage/cacher.(*cacheWatcher)", "handlers.serveWatch", "(*WatchServer)",
        "cacher.(*Cacher).dispatchEvent", "cacher.(*Cacher).processEvent", "cacher.(*watchCache)",
    )),
    ("audit log", ("apiserver/pkg/audit", "plugin/pkg/audit")),
    ("CEL validation rules", ("cel-go", "apiserver/pkg/cel", "apiserver/schema/cel")),
    ("managedFields (apply, and tracking of updates)", ("managedfields", "structured-merge-diff")),
    ("CRD schema (prune, default, validate)", (
        "apiextensions-apiserver/pkg/apiserver/schema", "kube-openapi/pkg/validation",
        "customresource.(*customResourceStrategy)", "customresource.(*statusStrategy)",
    )),
    ("etcd: store and read", ("pkg/storage/etcd3", "go.etcd.io", "google.golang.org/grpc")),
    ("encode/decode", ("runtime/serializer", "encoding/json", "sigs.k8s.io/json", "protobuf")),
    ("authn, authz, admission", ("authentication", "authorization", "admission", "rbac")),
    ("TLS, HTTP/2", ("crypto/", "x/net/http2", "net/http.")),
    ("Go GC", ("runtime.gcBgMarkWorker", "runtime.gcDrain", "runtime.bgsweep",
               "runtime.bgscavenge")),
)  # fmt: skip
OTHER = "other"
NAMES = (*(name for name, _ in CLASSES), OTHER)

_SEPARATOR = re.compile(r"^-+\+-+$", re.M)
_HEAD = re.compile(r"^\s*([\d.]+)(s|ms|us|µs|ns)\s+(\S.*)$")
_UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_traces(text: str) -> list[tuple[float, list[str]]]:
    """`go tool pprof -traces` output: (seconds, frames leaf first) per distinct stack."""
    traces: list[tuple[float, list[str]]] = []
    for block in _SEPARATOR.split(text)[1:]:
        lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
        head = _HEAD.match(lines[0]) if lines else None
        if head is None:
            continue
        seconds = float(head.group(1)) * _UNIT[head.group(2)]
        traces.append((seconds, [head.group(3), *lines[1:]]))
    return traces


def classify(frames: list[str]) -> str:
    for name, markers in CLASSES:
        if any(marker in frame for frame in frames for marker in markers):
            return name
    return OTHER


def by_class(traces: list[tuple[float, list[str]]]) -> dict[str, float]:
    seconds = dict.fromkeys(NAMES, 0.0)
    for value, frames in traces:
        seconds[classify(frames)] += value
    return {name: round(value, 2) for name, value in seconds.items()}


def apiserver_profile_summary(sampler: ApiserverProfile) -> dict[str, Any]:
    """The arm's profile as CPU-s per class (the profile file stays where it was written)."""
    path = sampler.wait()
    if path is None:
        return {"error": sampler.error}
    return {"path": str(path), "seconds": sampler.seconds, "by_class": by_class(read(path))}


def read(path: Path) -> list[tuple[float, list[str]]]:
    done = subprocess.run(["go", "tool", "pprof", "-traces", str(path)],
                          check=True, capture_output=True, text=True)  # fmt: skip
    return parse_traces(done.stdout)
