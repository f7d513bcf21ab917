"""Operator scale benchmark: N VLLMServices through the operator vs the raw control plane.

One session on the local control plane (e2e/cluster.sh), alternating A/B runs:
  raw       the same specs rendered offline by the operator's renderer; their children
            (Deployment, Service, ServiceMonitor) applied directly, 8 client threads
  operator  the VLLMServices applied with the same 8 threads; a fresh operator does the rest
and per run: time to all Ready (raw: every Deployment available; operator: every VLLMService
Ready=True), creation span (first apply to the last child created), API writes in the
namespace (audit log, every agent), kube-apiserver and etcd CPU, the operator's CPU and peak RSS
(raw: the bench process's applier), and for the operator how long after its Deployment became
available each service's Ready was written. The workload is examples/three-layer-budgets.yaml
(2 replicas, a ServiceMonitor) under unique names. A last phase restarts the operator over the
Ready services and counts writes while it resumes and resyncs (must be 0).
Figures go to bench/results/operator_scale.{json,md,png}; nothing here passes or fails on time.

Run: make bench-operator   (or: python bench/operator_scale.py --services 300 --runs 3)
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.apiserver_pprof import apiserver_profile_summary
from bench.scale_probes import (
    ApiserverProfile,
    Watcher,
    audit_writes,
    component_pid,
    count_delta,
    cpu_seconds,
    peak_rss_mib,
    read_counts,
)
from bench.scale_report import LAGS, summarize, write_report

from vllm_operator import constants as c
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.config import load_operator_config
from vllm_operator.k8s.client import (
    KubeClient,
    NotFoundError,
    build_api_client,
    resource_path,
)
from vllm_operator.render import render_all
from vllm_operator.render.drift import stamp_applied_hash
from vllm_operator.render.overrides import overrides_from_status

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results"
WORKLOAD = ROOT / "examples" / "three-layer-budgets.yaml"
THREADS = 8
FM_BENCH = "vllm-bench"


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def bench_nodes(pods: int) -> list[dict[str, Any]]:
    """Extra kwok nodes so that every replica finds a GPU (the e2e fleet is small)."""
    per_node = 128
    capacity = {"cpu": "4000", "memory": "64Ti", "pods": str(per_node)}
    capacity["nvidia.com/gpu"] = str(per_node)
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
            "status": {"allocatable": capacity, "capacity": capacity},
        }
        for i in range((pods + per_node - 1) // per_node)
    ]


def workload(n: int, ns: str) -> list[dict[str, Any]]:
    base = yaml.safe_load(WORKLOAD.read_text())
    out = []
    for i in range(n):
        obj = copy.deepcopy(base)
        obj["metadata"] = {"name": f"svc-{i:04d}", "namespace": ns}
        out.append(obj)
    return out


def raw_children(bodies: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """What the operator would apply for each service, without owners (there is no parent)."""
    cfg = load_operator_config(os.environ)
    out = []
    for body in bodies:
        svc = VLLMService.model_validate(body)
        rendered = render_all(svc, cfg, overrides_from_status(svc))
        children = []
        for manifest in rendered.manifests:
            child = stamp_applied_hash(manifest, c.LABEL_APPLIED_HASH)
            child["metadata"].pop("ownerReferences", None)
            children.append(child)
        out.append(children)
    return out


def start_operator(
    ns: str, tag: str, env: dict[str, str], profile: Path | None = None, port: int = 18080
) -> Any:
    argv = [sys.executable, "-m", "vllm_operator.cli"]
    if profile is not None:  # the same CLI under a sampler of all its threads
        argv = [sys.executable, str(Path(__file__).parent / "profile_operator.py"), str(profile)]
    argv += ["run", "-n", ns]
    argv += ["--liveness", f"http://127.0.0.1:{port}/healthz"]
    log_file = (OUT / f"operator_scale_{tag}.log").open("wb")
    out = {"stdout": log_file, "stderr": subprocess.STDOUT}
    op = subprocess.Popen(argv, env={**os.environ, **env}, **out)
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return op
        except OSError:
            if time.monotonic() > deadline or op.poll() is not None:
                raise RuntimeError("operator did not start; see its log in bench/results") from None
            time.sleep(0.2)


def stop_operator(op: Any) -> None:
    op.terminate()
    try:
        op.wait(timeout=30)
    except subprocess.TimeoutExpired:
        op.kill()
        op.wait()


def apply_parallel(kube: KubeClient, items: list[list[dict[str, Any]]], tag: str) -> None:
    """Each item's objects in order, THREADS items at a time (server-side apply)."""

    def one(objs: list[dict[str, Any]]) -> None:
        for obj in objs:
            kube.apply(obj, field_manager=FM_BENCH)

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        for k, _ in enumerate(pool.map(one, items), 1):
            if k % max(1, len(items) // 4) == 0:
                log(f"{tag}: applied {k}/{len(items)}")


def wait_ready(w: Watcher, kind: str, n: int, tag: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while w.count(kind, w.ready) < n and time.monotonic() < deadline:
        time.sleep(2)
        log(
            f"{tag}: {w.count('Deployment', w.created)} Deployments,"
            f" {w.count('Deployment', w.ready)} available, {w.count(kind, w.ready)} {kind} Ready"
        )


def run_arm(
    arm: str,
    k: int,
    n: int,
    kube: KubeClient,
    audit_log: Path,
    profile: Path | None = None,
    env: dict[str, str] | None = None,
    pprof: tuple[int, Path] | None = None,
) -> dict[str, Any]:
    """One arm's run; `env`: more environment for the operator (another tree's PYTHONPATH)."""
    since = time.time()  # for the audit log's backups (scale_probes.audit_writes)
    ns = f"bench-{arm}-{k}-{int(since)}"
    tag = f"{arm} #{k + 1}"
    create_namespace(kube, ns)
    bodies = workload(n, ns)
    items = raw_children(bodies) if arm == "raw" else [[b] for b in bodies]
    op = start_operator(ns, f"{n}_{k}", env or {}, profile) if arm == "operator" else None
    proc = op.pid if op else os.getpid()
    w = Watcher(kube, ns)
    w.start()
    time.sleep(1)  # let the watches open before the first apply
    api_pid, etcd_pid = component_pid("kube-apiserver"), component_pid("etcd")
    served0 = read_counts(kube)  # outside the CPU window: parsing it is the bench's own work
    cpu0 = (cpu_seconds(api_pid), cpu_seconds(etcd_pid), cpu_seconds(proc))
    log(f"{tag}: applying {n} to {ns}")
    sampler = None
    if pprof is not None:  # seconds, and the folder for the profile
        sampler = ApiserverProfile(kube, pprof[0], pprof[1] / f"{arm}-{k + 1}.pb.gz")
        sampler.start()
    t0 = time.monotonic()
    apply_parallel(kube, items, tag)
    kind = c.KIND if arm == "operator" else "Deployment"
    wait_ready(w, kind, n, tag, timeout=max(120.0, n * 0.4))
    cpu1 = (cpu_seconds(api_pid), cpu_seconds(etcd_pid), cpu_seconds(proc))
    served = count_delta(served0, read_counts(kube))
    ready = [t for (kd, _), t in list(w.ready.items()) if kd == kind]
    lags = [
        w.ready[(c.KIND, name)] - w.ready[("Deployment", name)]
        for (kd, name) in list(w.ready)
        if kd == c.KIND and ("Deployment", name) in w.ready
    ]
    pickups = [
        w.created[("Deployment", name)] - w.created[(c.KIND, name)]
        for (kd, name) in list(w.created)
        if kd == c.KIND and ("Deployment", name) in w.created
    ]
    children = [t for (kd, _), t in list(w.created.items()) if kd in ("Deployment", "Service")]
    time.sleep(1)  # the audit backend writes in batches
    by_agent = audit_writes(audit_log, ns, since)
    result = {
        "arm": arm,
        "namespace": ns,
        "ready": len(ready),
        "all_ready_s": round(max(ready) - t0, 2) if len(ready) == n else None,
        "creation_span_s": round(max(children) - t0, 2) if len(children) == 2 * n else None,
        "writes": sum(by_agent.values()),
        "writes_by_agent": dict(sorted(by_agent.items())),
        "apiserver_cpu_s": round(cpu1[0] - cpu0[0], 2),
        "etcd_cpu_s": round(cpu1[1] - cpu0[1], 2),
        "client_cpu_s": round(cpu1[2] - cpu0[2], 2),
        "client_rss_mib": peak_rss_mib(proc) if op else None,
        "served": served,  # by the API server to every client, the bench's watches included
        "ready_times": [t - t0 for t in ready],
        "ready_lags": lags,
        "pickup_lags": pickups,
    }
    w.stop.set()
    if op:
        stop_operator(op)
    if sampler is not None:
        log(f"{tag}: waiting for the API server's {pprof[0] if pprof else 0} s profile")
        result["apiserver_profile"] = apiserver_profile_summary(sampler)
    log(f"{tag}: all Ready {result['all_ready_s']} s, {result['writes']} writes; cleaning up")
    delete_namespace(kube, ns)
    return result


def create_namespace(kube: KubeClient, ns: str) -> None:
    kube._request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})


def delete_namespace(kube: KubeClient, ns: str, timeout: float = 120) -> None:
    """Delete and wait until it is gone, so that its teardown does not load the next run."""
    kube._request("DELETE", f"/api/v1/namespaces/{ns}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            kube._request("GET", f"/api/v1/namespaces/{ns}")
        except NotFoundError:
            return
        time.sleep(2)
    log(f"namespace {ns} still terminating after {timeout:.0f}s; going on")


def idle_check(n: int, kube: KubeClient, audit_log: Path, seconds: float) -> dict[str, Any]:
    """Restart an operator over n Ready services: its resume and resync passes must write 0."""
    since = time.time()
    ns = f"bench-idle-{int(since)}"
    create_namespace(kube, ns)
    op = start_operator(ns, f"{n}_idle_first", {})
    w = Watcher(kube, ns)
    w.start()
    apply_parallel(kube, [[b] for b in workload(n, ns)], "idle setup")
    wait_ready(w, c.KIND, n, "idle setup", timeout=max(120.0, n * 0.4))
    w.stop.set()
    stop_operator(op)
    time.sleep(2)
    before = sum(audit_writes(audit_log, ns, since).values())
    resync = max(5.0, seconds / 2)
    op = start_operator(ns, f"{n}_idle", {"VLLM_OPERATOR_RESYNC_SECONDS": str(resync)})
    log(f"idle: operator restarted over {n} Ready services; {seconds:.0f}s window")
    time.sleep(seconds)
    stop_operator(op)
    time.sleep(1)
    after = audit_writes(audit_log, ns, since)
    delete_namespace(kube, ns)
    return {"seconds": seconds, "resync": resync, "writes": sum(after.values()) - before}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=300, help="N (default: %(default)s)")
    parser.add_argument(
        "--runs", type=int, default=3, help="runs per arm; 0: the profiled run only (%(default)s)"
    )
    parser.add_argument(
        "--idle", type=float, default=30, help="idle window after a restart, 0: skip (s)"
    )
    parser.add_argument("--stem", default="operator_scale", help="bench/results/<stem>.*")
    parser.add_argument(
        "--profile", action="store_true", help="one more operator run under a sampling profiler"
    )
    parser.add_argument(
        "--apiserver-profile",
        type=int,
        default=0,
        metavar="SECONDS",
        help="a CPU profile of kube-apiserver over SECONDS from each arm's first apply"
        " (longer than the slowest arm; needs `go`), summarised by what the time went to",
    )
    args = parser.parse_args()
    if args.services < 1 or args.runs < (0 if args.profile else 1) or args.idle < 0:
        parser.error("--services must be >= 1, --runs >= 1 (0 with --profile), --idle >= 0")
    if args.apiserver_profile < 0 or (args.apiserver_profile and shutil.which("go") is None):
        parser.error("--apiserver-profile: SECONDS >= 1, and `go` on PATH to read the profile")
    kube, audit_log = connect(parser)
    with bench_fleet(kube, args.services) as replicas:
        return run_session(args, kube, audit_log, replicas)


def connect(parser: argparse.ArgumentParser) -> tuple[KubeClient, Path]:
    """The bench's client of the local cluster (its CRDs applied) and the cluster's audit log."""
    kubeconfig = os.environ.get("KUBECONFIG") or str(ROOT / ".cluster" / "kubeconfig")
    audit_log = Path(os.environ.get("VLLMOP_AUDIT_LOG", ""))
    if not Path(kubeconfig).exists() or not audit_log.is_file():
        parser.error('no cluster: run `e2e/cluster.sh up` and eval "$(e2e/cluster.sh env)"')
    os.environ["KUBECONFIG"] = kubeconfig
    api = build_api_client(kubeconfig)
    api.user_agent = "vllm-bench/1"
    kube = KubeClient(api)
    subprocess.run(
        ["kubectl", "apply", "--server-side", "-f", str(ROOT / "crds")],
        check=True,
        capture_output=True,
    )
    return kube, audit_log


@contextlib.contextmanager
def bench_fleet(kube: KubeClient, services: int) -> Iterator[int]:
    """Nodes for every replica of `services` of the workload while the block runs; yields the
    workload's replicas per service."""
    replicas = int(yaml.safe_load(WORKLOAD.read_text())["spec"].get("replicas", 1))
    nodes = bench_nodes(services * replicas)
    for node in nodes:
        with contextlib.suppress(Exception):
            kube.create(node)
    try:
        yield replicas
    finally:
        for node in nodes:
            with contextlib.suppress(Exception):
                kube._request("DELETE", resource_path("v1", "Node", None, node["metadata"]["name"]))


def run_session(args: argparse.Namespace, kube: KubeClient, audit_log: Path, replicas: int) -> int:
    meta: dict[str, Any] = {
        "services": args.services,
        "runs": args.runs,
        "concurrency": THREADS,
        "workload": f"{WORKLOAD.relative_to(ROOT)}, {replicas} replicas, unique names",
        "command": " ".join(["python", "bench/operator_scale.py", *sys.argv[1:]]),
        "date": time.strftime("%Y-%m-%d"),
        "idle": None,
        "profiled_run": None,
        "apiserver_profile_s": args.apiserver_profile or None,
    }
    runs: list[dict[str, Any]] = []
    for k in range(args.runs):
        order = ("raw", "operator") if k % 2 == 0 else ("operator", "raw")
        for arm in order:
            pprof = (args.apiserver_profile, OUT / f"{args.stem}.pprof")
            runs.append(run_arm(arm, k, args.services, kube, audit_log,
                                pprof=pprof if args.apiserver_profile else None))  # fmt: skip
            write_report(OUT, args.stem, meta, runs)  # a session cut short keeps its runs
    if args.profile:  # one more operator run, sampled; not in the ratios (it slows it)
        where = OUT / f"{args.stem}.profile.json"
        profiled = run_arm("operator", args.runs, args.services, kube, audit_log, where)
        lags = summarize([profiled])
        meta["profiled_run"] = {
            **{k: v for k, v in profiled.items() if not isinstance(v, list)},
            **{key: lags.get(key) for key, _ in LAGS},
        }
    if args.idle:
        meta["idle"] = idle_check(args.services, kube, audit_log, args.idle)
    print(write_report(OUT, args.stem, meta, runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
