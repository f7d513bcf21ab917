"""Write (or, with --check, verify) the generated CRD files.

    python -m vllm_operator.tools.gen_crds [--check] [--root DIR]

Writes crds/serving.vllmop.io_vllmservices.yaml under DIR (default: the current directory), and
the same file into charts/vllm-operator/crds/ when that directory exists, with the deny lists of
the chart's admission policy (charts/vllm-operator/files/policy.yaml). --check writes nothing
and exits 1 naming every stale file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from vllm_operator.api.crd import CRD_FILENAME, crd_yaml
from vllm_operator.api.policy import POLICY_FILENAME, policy_file_yaml

CRD_DIR = Path("crds")
CHART_CRD_DIR = Path("charts/vllm-operator/crds")
CHART_FILES_DIR = Path("charts/vllm-operator/files")


def generated_files(root: Path) -> dict[Path, str]:
    """Each file this tool writes, with its content."""
    crd = crd_yaml()
    files = {root / CRD_DIR / CRD_FILENAME: crd}
    if (root / CHART_CRD_DIR).is_dir():
        files[root / CHART_CRD_DIR / CRD_FILENAME] = crd
    if (root / CHART_FILES_DIR).is_dir():
        files[root / CHART_FILES_DIR / POLICY_FILENAME] = policy_file_yaml()
    return files


def stale_files(files: dict[Path, str]) -> list[Path]:
    return [
        path
        for path, text in files.items()
        if (path.read_text(encoding="utf-8") if path.exists() else None) != text
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vllm_operator.tools.gen_crds")
    parser.add_argument("--check", action="store_true", help="verify only; exit 1 if stale")
    parser.add_argument("--root", type=Path, default=Path("."), help="repository root")
    args = parser.parse_args(argv)
    files = generated_files(args.root)
    stale = stale_files(files)
    if args.check:
        for path in stale:
            print(
                f"{path} is stale: it differs from the API models and policy; "
                "run `python -m vllm_operator.tools.gen_crds` and commit the result",
                file=sys.stderr,
            )
        return 1 if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[path], encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
