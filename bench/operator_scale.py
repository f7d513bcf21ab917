"""Operator scale benchmark on the local real control plane (issue: VLLMService reconcile).

For each N: apply N VLLMServices as fast as the API server takes them, then measure
  - apply -> Deployment latency (time the Deployment appears in a watch minus the create call)
  - time until every VLLMService is Ready, counted from the last apply
  - the operator's RSS (current and peak)
  - API writes to the operator's resources during an idle window, and the operator's (and kopf's)
    writes per service while they were created (the API audit log, by user agent)
Figures go to bench/results/operator_scale.{json,md,png}; nothing here passes or fails on time.

Run: make bench-operator   (or: python bench/operator_scale.py --counts 100,1000 --idle 300)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results"
GROUP, VERSION, PLURAL = "serving.vllmop.io", "v1alpha1", "vllmservices"


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def bench_nodes(count: int) -> list[dict[str, Any]]:
    """Extra kwok nodes so that every replica finds a GPU (the e2e fleet has 44)."""
    per_node = 128
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"bench-h100-{i}",
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    "type": "kwok",
                    "kubernetes.io/hostname": f"bench-h100-{i}",
                    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                    "nvidia.com/gpu.count": str(per_node),
                },
            },
            "status": {
                "allocatable": {
                    "cpu": "1000",
                    "memory": "4Ti",
                    "pods": str(per_node),
                    "nvidia.com/gpu": str(per_node),
                },
                "capacity": {
                    "cpu": "1000",
                    "memory": "4Ti",
                    "pods": str(per_node),
                    "nvidia.com/gpu": str(per_node),
                },
            },
        }
        for i in range((count + per_node - 1) // per_node)
    ]


def service(i: int, ns: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "VLLMService",
        "metadata": {"name": f"svc-{i:04d}", "namespace": ns},
        "spec": {
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "gpu": {"type": "H100-80GB", "count": 1},
            "replicas": 1,
            "budgets": {
                "queue": {"maxRequests": 64},
                "running": {"maxSeqs": 32, "maxActiveSeqs": 16},
            },
        },
    }


def audit_writes(audit_log: Path, namespace: str, since: float) -> dict[str, int]:
    """Writes to objects in `namespace` after `since` (epoch s), by user agent (audit log)."""
    counts: dict[str, int] = {}
    with audit_log.open() as f:
        for line in f:
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            if ref.get("namespace") != namespace or event.get("stage") != "ResponseComplete":
                continue
            stamp = event["requestReceivedTimestamp"]
            t = time.mktime(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
            if t < since:
                continue
            agent = event.get("userAgent", "?").split(" ")[0]
            key = f"{agent} {event['verb']} {ref.get('resource')}"
            counts[key] = counts.get(key, 0) + 1
    return counts


def _operator_writes(by_agent: dict[str, int]) -> list[int]:
    return [v for k, v in by_agent.items() if k.startswith(("vllm-operator/", "kopf/"))]


def rss_kib(pid: int) -> tuple[int, int]:
    fields = dict(
        line.split(":", 1)
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if ":" in line
    )
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def start_operator(ns: str, n: int, kubeconfig: str, port: int = 18080) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "vllm_operator.cli", "run", "-n", ns]
    argv += ["--liveness", f"http://127.0.0.1:{port}/healthz"]
    log_file = (OUT / f"operator_scale_{n}.log").open("wb")
    op = subprocess.Popen(
        argv,
        env={**os.environ, "KUBECONFIG": kubeconfig},
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return op
        except OSError:
            if time.monotonic() > deadline or op.poll() is not None:
                raise RuntimeError("operator did not start; see its log in bench/results") from None
            time.sleep(0.2)


def is_ready(obj: dict[str, Any]) -> bool:
    conds = obj.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def record_first(
    stop: threading.Event, list_fn: Any, record: dict[str, float], pred: Any, **kw: Any
) -> None:
    """Note the monotonic time each object first satisfies `pred` on a watch stream."""
    w = watch.Watch()
    while not stop.is_set():
        for ev in w.stream(list_fn, timeout_seconds=5, **kw):
            obj = ev["object"]
            name = obj["metadata"]["name"] if isinstance(obj, dict) else obj.metadata.name
            if name not in record and pred(obj):
                record[name] = time.monotonic()
            if stop.is_set():
                w.stop()


def apply_all(custom: client.CustomObjectsApi, n: int, ns: str) -> dict[str, float]:
    applied: dict[str, float] = {}

    def create(i: int) -> None:
        body = service(i, ns)
        t = time.monotonic()
        custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
        applied[body["metadata"]["name"]] = t

    with ThreadPoolExecutor(max_workers=8) as pool:
        for k, _ in enumerate(pool.map(create, range(n)), 1):
            if k % max(1, n // 10) == 0:
                log(f"N={n}: applied {k}/{n}")
    return applied


def measure_idle(n: int, idle: float, audit_log: Path, ns: str) -> dict[str, int]:
    idle_start = time.time() + 1  # the audit log has whole seconds
    t_idle = time.monotonic()
    while time.monotonic() - t_idle < idle:
        time.sleep(min(30, idle))
        so_far = sum(audit_writes(audit_log, ns, idle_start).values())
        log(f"N={n}: idle {time.monotonic() - t_idle:.0f}/{idle:.0f}s, writes so far {so_far}")
    return audit_writes(audit_log, ns, idle_start)


def add_nodes(core: client.CoreV1Api, n: int) -> None:
    for node in bench_nodes(n):
        try:
            core.create_node(node)
        except client.ApiException as exc:
            if exc.status != 409:
                raise


def run_one(n: int, idle: float, kubeconfig: str, audit_log: Path) -> dict[str, Any]:
    api = config.new_client_from_config(config_file=kubeconfig)
    core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
    ns = f"bench-{n}-{int(time.time())}"
    core.create_namespace({"metadata": {"name": ns}})
    add_nodes(core, n)
    op = start_operator(ns, n, kubeconfig)
    seen: dict[str, float] = {}
    ready: dict[str, float] = {}
    stop = threading.Event()
    try:
        watches = [
            (apps.list_namespaced_deployment, seen, lambda o: True, {"namespace": ns}),
            (
                custom.list_namespaced_custom_object,
                ready,
                is_ready,
                {"group": GROUP, "version": VERSION, "namespace": ns, "plural": PLURAL},
            ),
        ]
        for fn, rec, pred, kw in watches:
            threading.Thread(
                target=record_first, args=(stop, fn, rec, pred), kwargs=kw, daemon=True
            ).start()
        time.sleep(1)  # let both watches open before the first create

        log(f"N={n}: applying")
        wall_first = time.time() - 1  # the audit log has whole seconds
        t_first = time.monotonic()
        applied = apply_all(custom, n, ns)
        t_last = max(applied.values())
        log(f"N={n}: all applied in {t_last - t_first:.1f}s; waiting for Ready")
        deadline = time.monotonic() + max(300, n)
        while len(ready) < n and time.monotonic() < deadline:
            time.sleep(5)
            log(f"N={n}: {len(seen)} Deployments, {len(ready)} Ready")
        all_ready = max(ready.values()) - t_last if len(ready) == n else None
        latencies = [seen[k] - applied[k] for k in applied if k in seen]
        rss_ready, _ = rss_kib(op.pid)
        # what creating them cost: writes by agent from the first apply until all were Ready
        create_writes = audit_writes(audit_log, ns, wall_first)
        log(f"N={n}: idle window of {idle:.0f}s")
        by_agent = measure_idle(n, idle, audit_log, ns)
        rss_now, rss_peak = rss_kib(op.pid)
        return {
            "n": n,
            "apply_seconds": round(t_last - t_first, 2),
            "deployments_seen": len(latencies),
            "apply_to_deployment_p50_s": round(statistics.median(latencies), 3)
            if latencies
            else None,
            "apply_to_deployment_p99_s": round(percentile(latencies, 0.99), 3)
            if latencies
            else None,
            "ready": len(ready),
            "all_ready_after_last_apply_s": round(all_ready, 2) if all_ready is not None else None,
            "operator_rss_mib_ready": round(rss_ready / 1024, 1),
            "operator_rss_mib_end": round(rss_now / 1024, 1),
            "operator_rss_mib_peak": round(rss_peak / 1024, 1),
            "create_writes_by_agent": create_writes,
            "operator_writes_per_service": round(sum(_operator_writes(create_writes)) / n, 2),
            "idle_seconds": idle,
            "idle_api_writes": sum(by_agent.values()),
            "idle_writes_by_agent": by_agent,
            "latencies": sorted(latencies),
        }
    finally:
        stop.set()
        op.terminate()
        try:
            op.wait(timeout=30)
        except subprocess.TimeoutExpired:
            op.kill()
        core.delete_namespace(ns)
        for node in bench_nodes(n):
            with contextlib.suppress(client.ApiException):
                core.delete_node(node["metadata"]["name"])


def write_results(results: list[dict[str, Any]]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "operator_scale.json").write_text(
        json.dumps([{k: v for k, v in r.items() if k != "latencies"} for r in results], indent=2)
        + "\n"
    )
    rows = [
        "| N | apply→Deployment p50 (s) | p99 (s) | all Ready after last apply (s) "
        "| RSS ready / peak (MiB) | operator writes per service | idle writes |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rows.append(
            f"| {r['n']} | {r['apply_to_deployment_p50_s']} | {r['apply_to_deployment_p99_s']} | "
            f"{r['all_ready_after_last_apply_s']} ({r['ready']}/{r['n']}) | "
            f"{r['operator_rss_mib_ready']} / {r['operator_rss_mib_peak']} | "
            f"{r['operator_writes_per_service']} | "
            f"{r['idle_api_writes']} in {r['idle_seconds']:.0f}s |"
        )
    (OUT / "operator_scale.md").write_text(
        "# Operator scale (local control plane, 2 cores)\n\nTargets: p50 < 0.5 s and p99 < 2 s at "
        "1,000; all Ready within 60 s of the last apply; RSS < 250 MB; 0 idle writes.\n\n"
        + "\n".join(rows)
        + "\n"
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for r in results:
        lat = r["latencies"]
        if lat:
            ax.plot(lat, [(i + 1) / len(lat) for i in range(len(lat))], label=f"N={r['n']}")
    ax.set_xlabel("apply → Deployment latency (s)")
    ax.set_ylabel("fraction of VLLMServices")
    ax.set_title("Operator scale: apply-to-Deployment latency CDF")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(OUT / "operator_scale.png", dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--counts", default="100,1000", help="comma-separated N (default: %(default)s)"
    )
    parser.add_argument(
        "--idle", type=float, default=300, help="idle window in seconds (default: %(default)s)"
    )
    args = parser.parse_args()
    try:
        counts = [int(x) for x in args.counts.split(",")]
    except ValueError:
        parser.error("--counts must be comma-separated integers, e.g. 100,1000")
    if any(n < 1 for n in counts) or args.idle < 0:
        parser.error("--counts must be >= 1 and --idle >= 0")
    kubeconfig = os.environ.get("KUBECONFIG") or str(ROOT / ".cluster" / "kubeconfig")
    if not Path(kubeconfig).exists():
        parser.error(f"no cluster: {kubeconfig} missing; run `e2e/cluster.sh up` first")
    subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "apply", "--server-side", "-f", str(ROOT / "crds")],
        check=True,
        capture_output=True,
    )
    audit_log = Path(os.environ.get("VLLMOP_AUDIT_LOG", ""))
    if not audit_log.is_file():
        parser.error('VLLMOP_AUDIT_LOG must name the API audit log: eval "$(e2e/cluster.sh env)"')
    results = [run_one(n, args.idle, kubeconfig, audit_log) for n in counts]
    write_results(results)
    print((OUT / "operator_scale.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
