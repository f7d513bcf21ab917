"""`vllm-operator plan`: the json contract, the VLLMService it prints, the table, the plot, and
one-line errors with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from vllm_operator.api.errors import parse_vllmservice
from vllm_operator.cli import main
from vllm_operator.planning.evaluate import CONTRACT_FLAGS
from vllm_operator.planning.output import FIGURES

# Qwen2.5-0.5B on one H100 at 1 req/s: a plan of a few small evaluations
FAST = [
    "plan", "--gpu", "H100-80GB", "--model", "Qwen/Qwen2.5-0.5B-Instruct", "--poisson", "1",
    "--prompt-len", "exp:256", "--output-len", "exp:32", "--slo-ttft", "500ms",
    "--slo-itl", "50ms", "--max-replicas", "2",
]  # fmt: skip


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_json_is_the_stable_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([*FAST, "-o", "json", "--gpu-cost", "H100-80GB=4.5"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert list(doc)[:2] == ["points", "recommendation"]
    for point in [*doc["points"], doc["recommendation"]["predicted"]]:
        assert {"flags", "replicas", "gpu", *FIGURES} <= set(point)
        assert set(point["flags"]) == set(CONTRACT_FLAGS)
        assert point["cost_per_hour"] == pytest.approx(4.5 * point["gpu_hours_per_hour"])
    defaults = next(p for p in doc["points"] if p["step"] == "vLLM defaults")
    # a flag left at vLLM's default is present with the value vLLM 0.33 picks on an H100
    assert defaults["flags"]["max_num_seqs"] == 1024
    assert defaults["flags"]["max_num_batched_tokens"] == 8192
    assert defaults["flags"]["max_num_queued_reqs"] is None
    assert doc["recommendation"]["predicted"]["meets_slo"] is True
    svc = parse_vllmservice(doc["recommendation"]["vllmService"])
    assert svc.spec.model == "Qwen/Qwen2.5-0.5B-Instruct"
    assert "evaluations in" in err.splitlines()[-1]


def test_yaml_is_a_ready_vllmservice(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([*FAST, "-o", "yaml", "--service", "llm/chat"], capsys)
    assert code == 0
    svc = parse_vllmservice(yaml.safe_load(out))
    assert (svc.namespace, svc.name) == ("llm", "chat")
    assert svc.spec.autoscaling is not None and svc.spec.autoscaling.enabled
    assert svc.spec.autoscaling.min_replicas <= svc.spec.replicas
    assert svc.spec.autoscaling.max_replicas is not None
    assert svc.spec.autoscaling.max_replicas >= svc.spec.replicas
    assert svc.spec.slo is not None and svc.spec.slo.ttft_p95 == "500ms"
    if svc.spec.budgets is not None:
        assert svc.spec.autotune is not None and svc.spec.autotune.mode == "Recommend"
        assert svc.spec.autotune.bounds is not None


def test_table_has_a_row_per_point_and_the_recommendation(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plot = tmp_path / "plan.png"
    code, out, err = run([*FAST, "--plot", str(plot)], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["flags", "replicas", "GPU"]
    assert any(line.startswith("recommendation: ") for line in lines)
    rows = [line for line in lines[1:] if "H100-80GB" in line and not line.startswith("recomm")]
    assert len(rows) == err.count(": meets the SLO") + err.count(": misses the SLO")
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_sweep_reports_each_grid_value(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([*FAST, "--sweep", "max-num-seqs=16,32", "-o", "json"], capsys)
    assert code == 0
    seqs = {p["flags"]["max_num_seqs"] for p in json.loads(out)["points"] if "sweep" in p["step"]}
    assert seqs == {16, 32}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (["--gpu", "B300"], "--gpu: unknown GPU 'B300'"),
        (["--gpu", "A40"], "--gpu: 'A40' has an engine profile but is not in the operator's"),
        (["--model", "gpt-5"], "--model: unknown model 'gpt-5'"),
        (["--prompt-len", "gauss:5"], "--prompt-len: 'gauss:5' is not a length distribution"),
        (["--slo-itl", "1ms"], "no configuration meets the SLO"),
        (["--gpu", "L4"], "--gpu-cost must price every --gpu"),
        (["--gpu-cost", "H100-80GB=cheap"], "--gpu-cost: 'H100-80GB=cheap' is not TYPE=COST"),
        (["--sweep", "max-batch-size=8"], "--sweep: 'max-batch-size' is not one of"),
        (["--sweep", "max-num-seqs=a,b"], "--sweep: 'a,b' is not a list of integers"),
        (["--service", "chat"], "--service: 'chat' is not NAMESPACE/NAME"),
        (["--service", "NS/Bad_Name"], "--service: 'NS' is not a DNS label"),
        (["--service", "llm/Bad_Name"], "--service: 'Bad_Name' is not a DNS label"),
        (["--prompt-len", "200000"], "more than Qwen2.5-0.5B's max_model_len 32768"),
        (["--prompt-len", "lognormal:100,1e300"], "--prompt-len: 'lognormal:100,1e300': SIGMA"),
        (["--plot", "plan.gif"], "--plot plan.gif: the name must end in .png, .svg, .pdf"),
        (["--plot", "/nonexistent-dir/plan.png"], "no directory '/nonexistent-dir'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    change: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run([*FAST, *change], capsys)
    assert code == 2 and out == ""
    errors = [line for line in err.splitlines() if not line.startswith("plan [")]
    assert len(errors) == 1 and says in errors[0], err


def test_poisson_needs_lengths(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--gpu", "T4", "--model", "Qwen2.5-0.5B", "--poisson", "2", "--slo-ttft", "1s"]
    code, _, err = run(argv, capsys)
    assert code == 2
    assert err.strip() == (
        "vllm-operator plan: error: --poisson needs --prompt-len and --output-len"
    )


def test_from_prometheus_needs_a_service(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--gpu", "T4", "--model", "Qwen2.5-0.5B", "--slo-ttft", "1s",
            "--from-prometheus", "http://127.0.0.1:9"]  # fmt: skip
    code, _, err = run(argv, capsys)
    assert code == 2 and "--from-prometheus needs --service NAMESPACE/NAME" in err


def test_run_as_a_module_a_usage_error_is_still_one_line_and_exit_2() -> None:
    # `python -m vllm_operator.cli` loads cli.py twice (as __main__ and as the package module);
    # the commands raise the package module's UsageError, which must still be caught.
    import subprocess
    import sys

    argv = ["plan", "--gpu", "NoSuchGPU", "--model", "x", "--concurrency", "1", "--slo-ttft", "1s"]
    done = subprocess.run(
        [sys.executable, "-m", "vllm_operator.cli", *argv], capture_output=True, text=True
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "--gpu" in done.stderr, done.stderr


def test_a_plot_path_that_is_a_directory_is_refused_before_planning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "plots.png"
    folder.mkdir()
    code, out, err = run([*FAST, "--plot", str(folder)], capsys)
    assert code == 2 and out == "" and "is a directory" in err
    assert "plan [" not in err  # refused before any evaluation
    assert list(tmp_path.iterdir()) == [folder]


@pytest.mark.parametrize("flag", ["--slo-ttft", "--slo-itl", "--window"])
def test_absurd_durations_are_refused_by_the_flag(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main([*FAST, flag, "9" * 400])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and err.count("\n") == 1 and f"argument {flag}:" in err
