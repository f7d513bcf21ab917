"""`vllm-operator` command line: one sub-command per module in `vllm_operator.commands`.

Each command module exposes `add_arguments(parser)` and `run(args) -> int`. Only the module of
the command being run is imported, so `vllm-operator render` pays neither for kopf's import nor
for a problem in an unrelated command. `run_cli` is shared with the twin's `vllm-twin`, which
lists its own commands the same way.
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Final, NoReturn, TypeVar

from vllm_operator import __version__

T = TypeVar("T")
DAY: Final = 86400.0

# name -> one-line help. The module vllm_operator.commands.<name> holds the rest.
COMMANDS: dict[str, str] = {
    "run": "Run the operator (kopf) against the current kubeconfig or in-cluster.",
    "render": "Print every child manifest of a VLLMService file, no cluster needed.",
    "crds": "Print the CustomResourceDefinitions generated from the API models.",
    "plan": "Plan budgets, replicas and GPU type for a workload and an SLO, in the engine model.",
}


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2, no traceback."""


def look_up(flag: str, lookup: Callable[[str], T], name: str) -> T:
    """`lookup(name)`, its KeyError (a message naming what is known) a UsageError for `flag`."""
    try:
        return lookup(name)
    except KeyError as exc:
        raise UsageError(f"{flag}: {exc.args[0]}") from None


def check_number(value: float, low: float, high: float, *, open_low: bool = False) -> float:
    """`value` when finite and in [low, high] ((low, high] with open_low); ArgumentTypeError."""
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {value}")
    if value < low or (open_low and value == low) or value > high:
        bracket = "(" if open_low else "["
        raise argparse.ArgumentTypeError(f"must be in {bracket}{low:g}, {high:g}], got {value:g}")
    return value


def bounded_seconds(
    parse: Callable[[str], float], high: float, *, low: float = 0.0, open_low: bool = True
) -> Callable[[str], float]:
    """A duration flag: `parse` reads it (e.g. "500ms"), then the bounds apply.

    A bare float parses up to 1e308 and inf; bounding it keeps a 400-digit SLO from overflowing
    the arithmetic built on it."""

    def seconds(text: str) -> float:
        try:
            value = parse(text)
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise argparse.ArgumentTypeError(str(exc) or f"not a duration: {text!r}") from None
        return check_number(value, low, high, open_low=open_low)

    return seconds


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line on stderr (exit 2) instead of usage and error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(
    command: str | None,
    *,
    prog: str = "vllm-operator",
    commands: Mapping[str, str] = COMMANDS,
    package: str = "vllm_operator.commands",
    description: str = "Kubernetes operator for vLLM 0.33 inference servers.",
    version: str = __version__,
) -> argparse.ArgumentParser:
    parser = OneLineParser(prog=prog, description=description)
    # answers before a command is required: the image's smoke check runs `vllm-operator --version`
    parser.add_argument("--version", action="version", version=f"%(prog)s {version}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help_text in commands.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            module = importlib.import_module(f"{package}.{name}")
            module.add_arguments(p)
            p.set_defaults(_run=module.run)
    return parser


def run_cli(
    argv: Sequence[str] | None,
    *,
    prog: str,
    commands: Mapping[str, str],
    package: str,
    description: str,
) -> int:
    """Parse `argv`, run the chosen command; a UsageError becomes one line and exit code 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(
        command if command in commands else None,
        prog=prog,
        commands=commands,
        package=package,
        description=description,
    )
    args = parser.parse_args(argv)
    try:
        code: int = args._run(args)
    except UsageError as exc:
        print(f"{prog} {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return code


def main(argv: Sequence[str] | None = None) -> int:
    return run_cli(
        argv,
        prog="vllm-operator",
        commands=COMMANDS,
        package="vllm_operator.commands",
        description="Kubernetes operator for vLLM 0.33 inference servers.",
    )


if __name__ == "__main__":
    # `python -m vllm_operator.cli` runs this file as __main__; the commands raise the package
    # module's UsageError, so run the package module's main() for run_cli to catch it.
    from vllm_operator.cli import main as package_main

    sys.exit(package_main())
