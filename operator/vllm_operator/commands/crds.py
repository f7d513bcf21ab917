"""`vllm-operator crds`: print the CustomResourceDefinitions as YAML."""

from __future__ import annotations

import argparse
import sys

from vllm_operator.api.crd import crd_yaml

NAME = "crds"
HELP = "Print the VLLMService CustomResourceDefinition (YAML), generated from the API models."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # no options


def run(args: argparse.Namespace) -> int:
    del args
    sys.stdout.write(crd_yaml())
    return 0
