"""`vllm-twin loadgen` argument handling: refusals and the schedule it builds."""

from __future__ import annotations

import argparse
import json

import pytest

from vllm_twin.cli import main as cli_main
from vllm_twin.commands import loadgen
from vllm_twin.loadgen.trace import Arrival


def args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    loadgen.add_arguments(p)
    return p.parse_args(["--target", "http://127.0.0.1:1", *argv])


def test_non_loopback_targets_are_refused_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli_main(
        ["loadgen", "--target", "http://192.168.1.10:8000", "--rate", "1", "--duration", "1s"]
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert "vllm-twin loadgen: error:" in err and "not a loopback address" in err


def test_a_workload_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["loadgen", "--target", "http://127.0.0.1:1", "--duration", "1s"]) == 2
    assert "one of --trace or --rate is required" in capsys.readouterr().err


def test_packaged_conv_trace_replayed_twice_as_fast() -> None:
    schedule = loadgen.build_schedule(
        args("--trace", "conv", "--rate-multiplier", "2", "--duration", "10s")
    )
    # the first rows of azure-llm-2023-conv.csv: 18:15:46.6805900 374/44, 18:15:50.9951690 396/109
    assert schedule[0] == Arrival(0.0, 374, 44)
    assert (schedule[1].prompt_tokens, schedule[1].max_tokens) == (396, 109)
    assert schedule[1].offset == pytest.approx(2.1572895)
    assert all(a.offset < 10 for a in schedule)


def test_rate_mode_uses_fixed_lengths_and_the_request_cap() -> None:
    schedule = loadgen.build_schedule(
        args("--rate", "100", "--duration", "60s", "--max-requests", "7", "--prompt-tokens", "9")
    )
    assert len(schedule) == 7
    assert {(a.prompt_tokens, a.max_tokens) for a in schedule} == {(9, 64)}


def test_durations_take_units() -> None:
    a = args("--rate", "1", "--duration", "2m", "--retry-deadline", "1500ms")
    assert (a.duration, a.retry_deadline) == (120.0, 1.5)
    with pytest.raises(SystemExit):
        args("--rate", "1", "--duration", "soon")


def test_json_when_nothing_completed_is_valid_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["loadgen", "--target", "http://127.0.0.1:1", "--concurrency", "1", "--num-prompts",
            "2", "--json"]  # fmt: skip
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    assert "NaN" not in out and json.loads(out)["ttft_ms"]["mean"] is None


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--target", "http://127.0.0.1:99999"], "the port must be a number in 0-65535"),
        (
            ["--target", "http://127.0.0.1:1", "--retry-503", "--backoff-base", "10s",
             "--backoff-max", "1s"],
            "error: --backoff-base must be > 0 and <= --backoff-max, got 10s and 1s",
        ),
    ],
)  # fmt: skip
def test_bad_targets_and_backoffs_are_one_line_naming_the_flag(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["loadgen", *argv, "--rate", "1", "--duration", "1s"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err
