"""`vllm-operator` command line: one sub-command per module in `vllm_operator.commands`.

Each command module exposes `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`.
Commands are imported lazily so that `vllm-operator render` does not pay for kopf's import.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

# name -> module under vllm_operator.commands; help text lives in the module.
COMMANDS: dict[str, str] = {
    "run": "run",
    "render": "render",
    "crds": "crds",
    "simulate": "simulate",
    "twin": "twin",
    "loadgen": "loadgen",
}


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2, no traceback."""


def _load(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(f"vllm_operator.commands.{COMMANDS[name]}")
    except ModuleNotFoundError as exc:
        if exc.name == f"vllm_operator.commands.{COMMANDS[name]}":
            return None  # not built yet in this version
        raise


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vllm-operator", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = _load(name)
        if module is None:
            continue
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args._module.run(args)
    except UsageError as exc:
        print(f"vllm-operator {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
