"""Write (or, with --check, verify) the generated CRD files.

    python -m vllm_operator.tools.gen_crds [--check] [--root DIR]

Writes crds/serving.vllmop.io_vllmservices.yaml under DIR (default: the current directory), and
the same file into charts/vllm-operator/crds/ when that directory exists. --check writes nothing
and exits 1 naming every stale file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from vllm_operator.api.crd import CRD_FILENAME, crd_yaml

CRD_DIR = Path("crds")
CHART_CRD_DIR = Path("charts/vllm-operator/crds")


def crd_targets(root: Path) -> list[Path]:
    """Files that must hold the generated CRD."""
    targets = [root / CRD_DIR / CRD_FILENAME]
    if (root / CHART_CRD_DIR).is_dir():
        targets.append(root / CHART_CRD_DIR / CRD_FILENAME)
    return targets


def stale_files(root: Path, text: str) -> list[Path]:
    stale = []
    for target in crd_targets(root):
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current != text:
            stale.append(target)
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vllm_operator.tools.gen_crds")
    parser.add_argument("--check", action="store_true", help="verify only; exit 1 if stale")
    parser.add_argument("--root", type=Path, default=Path("."), help="repository root")
    args = parser.parse_args(argv)
    text = crd_yaml()
    stale = stale_files(args.root, text)
    if args.check:
        for path in stale:
            print(
                f"{path} is stale: it differs from the API models; "
                "run `python -m vllm_operator.tools.gen_crds` and commit the result",
                file=sys.stderr,
            )
        return 1 if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
