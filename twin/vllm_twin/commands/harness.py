"""`vllm-twin harness`: run vLLM twins for the Running pods of a local kwok cluster."""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import signal
from pathlib import Path

NAME = "harness"
HELP = (
    "Play the kubelet's part for vLLM pods on kwok nodes: one twin per Running pod on 127.0.0.1, "
    "Prometheus file-SD targets, and a loopback load balancer per VLLMService."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"), help="kubeconfig")
    parser.add_argument("--targets-dir", required=True, type=Path, help="Prometheus file-SD dir")
    parser.add_argument("--state-file", required=True, type=Path, help="JSON: balancers, twins")
    parser.add_argument("--log-dir", required=True, type=Path, help="one log file per twin")
    parser.add_argument(
        "-n", "--namespace", action="append", default=[], help="only this namespace (repeatable)"
    )
    parser.add_argument(
        "--time-scale", type=float, default=1.0, help="twin virtual seconds per wall second"
    )


def run(args: argparse.Namespace) -> int:
    from kubernetes.config import ConfigException

    from vllm_operator.catalog import GPUCatalog
    from vllm_operator.cli import UsageError
    from vllm_operator.k8s.client import KubeClient, build_api_client
    from vllm_twin.harness.kubelet import TwinKubelet

    if not args.time_scale > 0 or not math.isfinite(args.time_scale):
        raise UsageError("--time-scale must be a finite number > 0")
    for flag, d in (("--targets-dir", args.targets_dir), ("--log-dir", args.log_dir)):
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"{flag} {d}: {exc.strerror or exc}") from None
    try:
        api = build_api_client(args.kubeconfig)
    except (ConfigException, OSError) as exc:
        where = args.kubeconfig or "no --kubeconfig, no $KUBECONFIG, not in a cluster"
        raise UsageError(f"kubeconfig ({where}): {str(exc).splitlines()[0]}") from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s harness %(message)s")
    kubelet = TwinKubelet(
        kube=KubeClient(api),
        catalog=GPUCatalog(),
        targets_dir=args.targets_dir,
        state_file=args.state_file,
        log_dir=args.log_dir,
        time_scale=args.time_scale,
        namespaces=tuple(args.namespace),
    )

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await kubelet.run(stop)

    asyncio.run(main())
    return 0
