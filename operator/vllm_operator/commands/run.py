"""`vllm-operator run`: the operator process (kopf), standalone or with peering."""

from __future__ import annotations

import argparse
import asyncio

NAME = "run"
HELP = "Run the operator against the cluster of the current kubeconfig (or in-cluster)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace")
    scope.add_argument(
        "-n", "--namespace", action="append", default=[], help="watch this namespace (repeatable)"
    )
    parser.add_argument(
        "--peering", default=None, help="kopf peering object for HA (default: standalone)"
    )
    parser.add_argument(
        "--priority",
        type=int,
        default=0,
        help="kopf peering priority; with --peering the highest live priority is active",
    )
    parser.add_argument(
        "--liveness",
        default="http://127.0.0.1:8080/healthz",
        help="liveness endpoint URL (default: %(default)s)",
    )


def run(args: argparse.Namespace) -> int:
    import kopf

    import vllm_operator.main  # noqa: F401  (registers the handlers)

    asyncio.run(
        kopf.operator(
            clusterwide=args.all_namespaces or not args.namespace,
            namespaces=list(args.namespace),
            standalone=args.peering is None,
            peering_name=args.peering,
            priority=args.priority,
            liveness_endpoint=args.liveness or None,
            memo=kopf.Memo(namespaces=tuple(args.namespace), peering=args.peering),
        )
    )
    return 0
