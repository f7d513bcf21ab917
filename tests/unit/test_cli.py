"""The `vllm-operator` command line itself (the commands have tests of their own)."""

from __future__ import annotations

import pytest

from vllm_operator import __version__
from vllm_operator.cli import main


@pytest.mark.parametrize("argv", [["--version"], ["--version", "run"]])
def test_version_answers_without_a_command(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"vllm-operator {__version__}\n"


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 2
    assert "COMMAND" in capsys.readouterr().err
