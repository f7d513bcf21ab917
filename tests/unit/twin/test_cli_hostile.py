"""`vllm-twin simulate` and `loadgen` on generated hostile arguments: exit 0 or 2, one line.

Each generated command line is a small, fast base run with up to three flags set to values a
careless or hostile hand types: infinities, NaN, negatives, absurd magnitudes, junk. Whatever the
combination, the command ends at once with exit 0, or exit 2 and exactly one line on stderr;
never a traceback, never a hang on a schedule that does not end.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from vllm_twin.cli import main

PROPERTY_EXAMPLES = 200
HOSTILE = (
    "inf", "-inf", "nan", "NaN", "-1", "0", "1e400", "1e300", "99999999999999999999", "abc", "",
    "1:inf", "nan:1", "-1s", "infs", "1e9h",
)  # fmt: skip
SIMULATE_BASE = ["simulate", "--quiet", "--poisson", "1", "--duration", "2s"]
SIMULATE_FLAGS = {  # flag -> a value that keeps the run small
    "--poisson": "1",
    "--duration": "2s",
    "--replicas": "2",
    "--ramp": "1:2",
    "--rate-multiplier": "1",
    "--trace-start": "0",
    "--prompt-mean": "64",
    "--output-mean": "16",
    "--max-num-seqs": "8",
    "--max-num-batched-tokens": "2048",
    "--max-model-len": "4096",
    "--gpu-memory-utilization": "0.9",
    "--tensor-parallel-size": "1",
    "--block-size": "16",
    "--watermark": "0.01",
    "--slo-ttft": "500ms",
    "--slo-itl": "50ms",
    "--seed": "3",
}
LOADGEN_BASE = ["loadgen", "--target", "http://127.0.0.1:9", "--rate", "1", "--duration", "1ms"]
LOADGEN_FLAGS = {
    "--rate": "1",
    "--duration": "1ms",
    "--rate-multiplier": "1",
    "--prompt-tokens": "8",
    "--max-tokens": "4",
    "--max-requests": "1",
    "--retry-deadline": "1s",
    "--backoff-base": "10ms",
    "--backoff-max": "20ms",
    "--request-timeout": "1s",
    "--slo-ttft": "500ms",
    "--slo-tpot": "60ms",
    "--time-scale": "1",
    "--seed": "3",
}


HOSTILE_SETTINGS = settings(
    derandomize=True,
    max_examples=PROPERTY_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def _argv(flags: dict[str, str]) -> Any:
    pairs = st.tuples(st.sampled_from(sorted(flags)), st.sampled_from(HOSTILE))
    return st.lists(pairs, min_size=1, max_size=3).map(
        lambda chosen: [item for flag, value in chosen for item in (flag, value)]
    )


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own exit, after printing its one line
        code = exc.code if isinstance(exc.code, int) else 2
    return code, capsys.readouterr().err


def _check(code: int, err: str, argv: list[str]) -> None:
    event(f"exit {code}")
    assert code in (0, 2), (argv, err)
    if code == 2:
        assert err.count("\n") == 1 and err.endswith("\n"), (argv, err)
        assert "Traceback" not in err, (argv, err)


@HOSTILE_SETTINGS
@given(extra=_argv(SIMULATE_FLAGS))
def test_simulate_never_hangs_or_crashes(
    extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*SIMULATE_BASE, *extra]
    _check(*_run(argv, capsys), argv)


@HOSTILE_SETTINGS
@given(extra=_argv(LOADGEN_FLAGS))
def test_loadgen_never_hangs_or_crashes(
    extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*LOADGEN_BASE, *extra]
    _check(*_run(argv, capsys), argv)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["simulate", "--poisson", "1e5", "--duration", "100h"],
            "vllm-twin simulate: error: --poisson x --duration would schedule about 3.6e+10 "
            "requests; at most 1,000,000 per run (lower the rate or the duration)",
        ),
        (
            ["loadgen", "--target", "http://127.0.0.1:9", "--rate", "1e5", "--duration", "60m"],
            "vllm-twin loadgen: error: --rate x --duration would schedule about 3.6e+08 "
            "requests; at most 1,000,000 per run (lower the rate or the duration)",
        ),
        (
            ["simulate", "--replicas", "1e9"],
            "vllm-twin simulate: error: argument --replicas: not an integer: '1e9' "
            "(see vllm-twin simulate --help)",
        ),
        (
            ["loadgen", "--target", "http://127.0.0.1:9", "--rate", "inf", "--duration", "1s"],
            "vllm-twin loadgen: error: argument --rate: must be a finite number, got inf "
            "(see vllm-twin loadgen --help)",
        ),
    ],
    ids=["simulate-schedule-cap", "loadgen-schedule-cap", "replicas-not-int", "rate-inf"],
)
def test_absurd_values_are_refused_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(argv, capsys) == (2, message + "\n")
