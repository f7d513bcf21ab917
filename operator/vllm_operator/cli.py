"""`vllm-operator` command line: one sub-command per module in `vllm_operator.commands`.

Each command module exposes `HELP`, `add_arguments(parser)` and `run(args) -> int`. Only the
module of the command being run is imported, so `vllm-operator render` pays neither for kopf's
import nor for a problem in an unrelated command.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# name -> one-line help. The module vllm_operator.commands.<name> holds the rest.
COMMANDS: dict[str, str] = {
    "run": "Run the operator (kopf) against the current kubeconfig or in-cluster.",
    "render": "Print every child manifest of a VLLMService file, no cluster needed.",
    "crds": "Print the CustomResourceDefinitions generated from the API models.",
    "simulate": "Replay a workload through simulated vLLM replicas in virtual time.",
    "twin": "Serve a vLLM 0.33 twin over HTTP, with the same argv as `vllm serve`.",
    "loadgen": "Send open-loop load to loopback endpoints and report latency and 503s.",
    "harness": "Run vLLM twins for the Running pods of a local kwok cluster.",
}


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2, no traceback."""


def build_parser(command: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vllm-operator", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            module = importlib.import_module(f"vllm_operator.commands.{name}")
            module.add_arguments(p)
            p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    args = build_parser(command if command in COMMANDS else None).parse_args(argv)
    try:
        code: int = args._run(args)
    except UsageError as exc:
        print(f"vllm-operator {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
