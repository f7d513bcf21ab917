"""The operator's log: its own lines at the configured level, kopf's from warning."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pytest

from vllm_operator.observability import configure_logging


@pytest.fixture
def restored() -> Iterator[None]:
    root = logging.getLogger()
    ours = logging.getLogger("vllm_operator")
    handlers, root_level, our_level = root.handlers[:], root.level, ours.level
    yield
    root.handlers[:] = handlers
    root.setLevel(root_level)
    ours.setLevel(our_level)


@pytest.mark.parametrize(
    ("level", "ours", "kopf"),
    [
        ("info", logging.INFO, logging.WARNING),
        ("warning", logging.WARNING, logging.WARNING),
        ("error", logging.ERROR, logging.WARNING),
        ("debug", logging.DEBUG, logging.DEBUG),
    ],
)
def test_the_level_applies_to_the_operator_and_kopf_speaks_from_warning(
    restored: None, level: str, ours: int, kopf: int
) -> None:
    configure_logging(level)
    assert logging.getLogger("vllm_operator.handlers.tune").getEffectiveLevel() == ours
    assert logging.getLogger("kopf.objects").getEffectiveLevel() == kopf


def test_a_line_carries_a_utc_time_the_level_and_the_logger(
    restored: None, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("info")
    logging.getLogger("vllm_operator").info("ns/svc ScaleReplicas ScaleDownLowLoad: 3 -> 1")
    logging.getLogger("kopf.objects").info("Handler succeeded")  # below kopf's level
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO vllm_operator: "
        r"ns/svc ScaleReplicas ScaleDownLowLoad: 3 -> 1",
        lines[0],
    ), lines[0]
