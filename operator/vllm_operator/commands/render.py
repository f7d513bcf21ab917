"""`vllm-operator render -f FILE`: print every child manifest, no cluster needed."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from vllm_operator.api.errors import InvalidSpecError, parse_vllmservice
from vllm_operator.api.v1alpha1 import VLLMService
from vllm_operator.cli import UsageError
from vllm_operator.commands.yamlinput import (
    MAX_INPUT_BYTES,
    InputError,
    decode_input,
    load_documents,
)
from vllm_operator.config import (
    ENV_CONFIG_FILE,
    ConfigError,
    OperatorConfig,
    load_operator_config,
)
from vllm_operator.constants import KIND
from vllm_operator.render import RenderError, render_all

NAME = "render"
HELP = "Print the manifests a VLLMService renders to (multi-document YAML), no cluster needed."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f",
        "--filename",
        required=True,
        metavar="FILE",
        help="YAML file with one or more VLLMService documents ('-' for stdin)",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help=f"operator config YAML (default: ${ENV_CONFIG_FILE}, else built-in defaults)",
    )


def _load_documents(text: str, source: str) -> list[Any]:
    try:
        return load_documents(text)
    except InputError as exc:
        raise UsageError(f"{source}: {exc}") from None


def _parse(docs: list[Any], path: str) -> list[tuple[str, VLLMService]]:
    """(where, object) per document; `where` names the file and, if several, the document."""
    services: list[tuple[str, VLLMService]] = []
    problems: list[str] = []
    for index, doc in enumerate(docs, start=1):
        where = path if len(docs) == 1 else f"{path} (document {index})"
        if not isinstance(doc, dict) or doc.get("kind") != KIND:
            problems.append(f"{where}: not a {KIND}")
            continue
        try:
            services.append((where, parse_vllmservice(doc)))
        except InvalidSpecError as exc:
            problems += [f"{where}: {message}" for message in exc.messages]
    if problems:
        raise UsageError("\n".join(problems))
    if not services:
        raise UsageError(f"{path}: no {KIND} documents")
    return services


def render_text(text: str, source: str, cfg: OperatorConfig) -> tuple[str, list[str]]:
    """Multi-document YAML of every child of every VLLMService in `text`, and the warnings.

    `source` names the input in messages. Raises UsageError with one line per problem.
    """
    manifests: list[dict[str, Any]] = []
    warnings: list[str] = []
    for where, svc in _parse(_load_documents(text, source), source):
        try:
            result = render_all(svc, cfg)
        except RenderError as exc:
            raise UsageError(f"{where}: {exc}") from None
        warnings += [f"{where}: {warning}" for warning in result.warnings]
        manifests += result.manifests
    return yaml.safe_dump_all(manifests, sort_keys=False, explicit_start=True), warnings


def run(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    if args.config:
        env[ENV_CONFIG_FILE] = args.config
    try:
        cfg = load_operator_config(env)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    path = args.filename
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            with Path(path).open("rb") as file:
                data = file.read(MAX_INPUT_BYTES + 1)
        text = decode_input(data)
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    except InputError as exc:
        raise UsageError(f"{path}: {exc}") from None
    output, warnings = render_text(text, path, cfg)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    sys.stdout.write(output)
    return 0
