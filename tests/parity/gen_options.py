"""Write operator/vllm_operator/vllm/options.json from vLLM 0.33.0's own `vllm serve` parser.

    python -m tests.parity.gen_options           # (re)generate the committed file
    python -m tests.parity.gen_options --check   # exit 1 when it differs from vLLM's parser

It builds (or reuses) the reference venv with e2e/vllm-ref-venv.sh and runs
tests/parity/vllm_probe.py --options there. The parity tier runs the same comparison
(test_vllm_parity.py::test_committed_option_list_is_vllms).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
VENV_SCRIPT = REPO / "e2e" / "vllm-ref-venv.sh"
PROBE = Path(__file__).with_name("vllm_probe.py")
OPTIONS_JSON = REPO / "operator" / "vllm_operator" / "vllm" / "options.json"


class ReferenceError(RuntimeError):
    """The reference venv or the probe failed; the message carries the tail of its output."""


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def clean_env() -> dict[str, str]:
    """The environment without the project venv's Python settings."""
    drop = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def reference_python() -> str:
    """The reference venv's python: built on first use, then cached."""
    proc = subprocess.run(
        [str(VENV_SCRIPT)], capture_output=True, text=True, env=clean_env(), check=False
    )
    if proc.returncode != 0:
        raise ReferenceError(
            f"e2e/vllm-ref-venv.sh failed (exit {proc.returncode}):\n{_tail(proc.stderr)}"
        )
    return proc.stdout.strip().splitlines()[-1]


def run_probe(python: str, mode: list[str], payload: Any = None) -> Any:
    """vllm_probe.py's JSON answer for `mode` (e.g. ["--options"]) and stdin `payload`."""
    proc = subprocess.run(
        [python, str(PROBE), *mode],
        input="" if payload is None else json.dumps(payload),
        capture_output=True,
        text=True,
        env={**clean_env(), "VLLM_TARGET_DEVICE": "cpu"},
        timeout=900,
        check=False,
    )
    if proc.returncode != 0:
        raise ReferenceError(
            f"vllm_probe.py failed (exit {proc.returncode}):\n{_tail(proc.stderr)}"
        )
    return json.loads(proc.stdout)


def format_options(data: dict[str, Any]) -> str:
    """One option (and one environment variable) per line, so a vLLM upgrade reads as a short
    diff."""
    rows = ",\n".join("  " + json.dumps(o, sort_keys=True) for o in data["options"])
    names = ",\n".join("  " + json.dumps(name) for name in data["environment"])
    return (
        f'{{"vllm": {json.dumps(data["vllm"])}, "environment": [\n{names}\n], '
        f'"options": [\n{rows}\n]}}\n'
    )


def main(argv: list[str]) -> int:
    text = format_options(run_probe(reference_python(), ["--options"]))
    if argv == ["--check"]:
        if OPTIONS_JSON.read_text(encoding="utf-8") != text:
            print(
                f"{OPTIONS_JSON.relative_to(REPO)} differs from vLLM's parser; "
                "run python -m tests.parity.gen_options",
                file=sys.stderr,
            )
            return 1
        return 0
    OPTIONS_JSON.write_text(text, encoding="utf-8")
    print(f"wrote {OPTIONS_JSON.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
