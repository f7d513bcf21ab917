"""Fixtures of the chart tier."""

from __future__ import annotations

import pytest

from tests.chart.image import build_image
from tests.chart.support import Helm, toolchain_bin


@pytest.fixture(scope="session")
def helm_bin() -> Helm:
    """helm without a cluster: lint and template."""
    binary = toolchain_bin() / "helm"
    if not binary.exists():
        pytest.fail(f"{binary} missing: run `make toolchain`", pytrace=False)
    return Helm(binary)


@pytest.fixture(scope="session")
def operator_image() -> str:
    """The operator image of this tree, built or reused (cache keyed by its inputs)."""
    return build_image()
