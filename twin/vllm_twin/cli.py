"""`vllm-twin` command line: the vLLM 0.33 twin and the tools around it.

One sub-command per module in `vllm_twin.commands`, run by the operator's own CLI runner
(`vllm_operator.cli.run_cli`), so errors read and exit the same way in both programs.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from vllm_operator.cli import run_cli

# name -> one-line help. The module vllm_twin.commands.<name> holds the rest.
COMMANDS: dict[str, str] = {
    "twin": "Serve a vLLM 0.33 twin over HTTP, with the same argv as `vllm serve`.",
    "simulate": "Replay a workload through simulated vLLM replicas in virtual time.",
    "loadgen": "Send open-loop load to loopback endpoints and report latency and 503s.",
    "calibrate": "Fit the profiles' coefficients to the measured fit set (calibrated.yaml).",
    "harness": "Run vLLM twins for the Running pods of a local kwok cluster.",
}


def main(argv: Sequence[str] | None = None) -> int:
    return run_cli(
        argv,
        prog="vllm-twin",
        commands=COMMANDS,
        package="vllm_twin.commands",
        description="A vLLM 0.33 twin: engine model, HTTP server, load generator, kwok harness.",
    )


if __name__ == "__main__":
    sys.exit(main())
