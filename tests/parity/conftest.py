"""The reference venv for the parity tier (e2e/vllm-ref-venv.sh), shared by its modules."""

from __future__ import annotations

import pytest

from tests.parity.gen_options import ReferenceError, reference_python


@pytest.fixture(scope="session")
def vllm_python() -> str:
    """The reference venv's python: built on first use, then cached; a failed build fails."""
    try:
        return reference_python()
    except ReferenceError as exc:
        pytest.fail(str(exc), pytrace=False)
