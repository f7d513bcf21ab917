"""`vllm-twin simulate`: output formats and one-line errors naming the flag."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from vllm_twin.cli import main


def test_json_figures_for_a_small_poisson_run(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "simulate",
            "--poisson", "4", "--duration", "20s", "--replicas", "2",
            "--max-num-seqs", "64", "--max-model-len", "8k",
            "--slo-ttft", "500ms", "--slo-itl", "60ms", "--json", "--quiet",
        ]
    )  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["engine"]["max_num_seqs"] == 64
    assert out["engine"]["max_model_len"] == 8000  # human-readable: lower case is decimal
    assert out["engine"]["max_num_batched_tokens"] == 8192  # H100 default
    figures = out["figures"]
    assert figures["offered"] == figures["completed"] > 50
    assert figures["slo"] == {"ttft": 0.5, "itl": 0.06}
    assert 0 < figures["ttft"]["p50"] < figures["ttft"]["p99"]


def test_table_and_records_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = tmp_path / "records.jsonl"
    code = main(
        [
            "simulate", "--trace", "code", "--duration", "30", "--max-model-len", "16384",
            "--records", str(records), "--quiet",
        ]
    )  # fmt: skip
    assert code == 0
    table = capsys.readouterr().out
    assert "TTFT p50/p95/p99" in table and "trace code x1.0" in table
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    assert rows and all(row["outcome"] == "ok" for row in rows)
    assert {"ttft", "e2e", "queue_time", "replica"} <= set(rows[0])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--gpu", "V100"], "--gpu: unknown GPU 'V100'; known: H100-80GB, H200-141GB"),
        (["--model", "gpt-5"], "--model: unknown model 'gpt-5'; known: Llama-3.1-8B"),
        (
            ["--poisson", "-2", "--duration", "5"],
            "argument --poisson: must be in (0, 100000], got -2 (see vllm-twin simulate --help)",
        ),
        (
            ["--rate-multiplier", "0"],
            "argument --rate-multiplier: must be in (0, 10000], got 0 "
            "(see vllm-twin simulate --help)",
        ),
        (["--poisson", "1"], "--duration is required with --poisson and --ramp"),
        (["--slo-ttft", "1s"], "--slo-ttft and --slo-itl go together"),
        (["--ramp", "1-2", "--duration", "5"], "--ramp must be FROM:TO in req/s, got '1-2'"),
        (
            ["--max-num-seqs", "16", "--max-num-active-seqs", "32"],
            "max_num_active_seqs (32) cannot be greater than max_num_seqs (16).",
        ),
        (["--gpu", "L4"], "To serve at least one request with the model's max seq len (131072)"),
    ],
)
def test_bad_input_is_one_line_naming_the_problem(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["simulate", "--quiet", *argv])
    except SystemExit as exc:  # a flag's own type refused it, in argparse's one line
        code = exc.code if isinstance(exc.code, int) else 2
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"vllm-twin simulate: error: {message}")
    assert err.count("\n") == 1


def test_concurrency_runs_a_closed_loop_with_bench_serve_figures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["simulate", "--concurrency", "2", "--num-prompts", "4", "--warmup", "2"]
    assert main([*argv, "--prompt-mean", "64", "--output-mean", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    figures = out["figures"]
    assert figures["completed"] == 4 and figures["total_output_tokens"] == 32
    assert figures["ttft_ms"]["median"] > 0 and figures["request_throughput"] > 0
    assert out["workload"] == "closed loop, concurrency 2"


def test_a_closed_loop_needs_one_request(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:  # argparse refuses the value itself
        main(["simulate", "--concurrency", "2", "--num-prompts", "0"])
    assert exit_.value.code == 2
    assert "--num-prompts" in capsys.readouterr().err


def _strict_json(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    "argv",
    [
        ["--poisson", "1", "--duration", "0.001"],
        ["--concurrency", "1", "--num-prompts", "1", "--num-gpu-blocks-override", "0"],
    ],
)
def test_json_when_nothing_completed_is_valid_with_null_figures(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "--quiet", *argv, "--json"]) == 0
    out = _strict_json(capsys.readouterr().out)
    assert "null" in json.dumps(out["figures"])  # a percentile of no requests


def test_table_when_nothing_completed_shows_no_nan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "one.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,100,10\n")
    argv = ["simulate", "--quiet", "--trace", str(trace), "--max-num-queued-reqs", "0"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "nan" not in out and "- req/s, - output tok/s" in out


def test_a_failed_records_write_keeps_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from vllm_operator.sim import records as records_module

    def disk_full(row: Any) -> str:
        raise OSError(28, "No space left on device")

    records = tmp_path / "records.jsonl"
    records.write_text("previous\n")
    monkeypatch.setattr(records_module, "json", SimpleNamespace(dumps=disk_full))
    argv = ["simulate", "--quiet", "--poisson", "1", "--duration", "5", "--records", str(records)]
    assert main(argv) == 2
    assert "--records" in capsys.readouterr().err
    assert records.read_text() == "previous\n"
    assert sorted(tmp_path.iterdir()) == [records]  # no temporary file left behind
