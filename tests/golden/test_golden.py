"""Each examples/*.yaml rendered exactly as `vllm-operator render -f` prints it.

Refresh after an intended change, then review the diff like code:

    UPDATE_GOLDEN=1 .venv/bin/pytest tests/golden
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vllm_operator.commands.render import render_text
from vllm_operator.config import load_operator_config

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
GOLDEN = Path(__file__).parent
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def test_every_example_has_a_golden_and_every_golden_an_example() -> None:
    assert {e.name for e in EXAMPLES} >= {
        "minimal.yaml",
        "three-layer-budgets.yaml",
        "tensor-parallel-4gpu.yaml",
        "l4-small-model.yaml",
        "autotune-recommend.yaml",
    }
    if not UPDATE:
        assert {g.name for g in GOLDEN.glob("*.yaml")} == {e.name for e in EXAMPLES}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example_renders_to_its_golden(example: Path) -> None:
    # Built-in operator defaults only: a developer's VLLM_OPERATOR_* must not change the output.
    cfg = load_operator_config({})
    text, warnings = render_text(example.read_text(encoding="utf-8"), example.name, cfg)
    assert warnings == [], "examples should show intended settings, without warnings"
    golden = GOLDEN / example.name
    if UPDATE:
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"no golden for {example.name}: run with UPDATE_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8"), (
        f"{example.name} renders differently from tests/golden/{example.name}; "
        "if intended, refresh with UPDATE_GOLDEN=1 and review the diff"
    )
