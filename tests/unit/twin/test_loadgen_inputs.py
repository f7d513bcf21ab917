"""Load generator inputs: loopback-only targets, durations, trace reading and schedules."""

from __future__ import annotations

import argparse
import itertools
import random
from pathlib import Path

import pytest

from vllm_operator.api.durations import duration_arg
from vllm_twin.loadgen.targets import check_target, is_loopback_host
from vllm_twin.loadgen.trace import (
    Arrival,
    bounded,
    poisson,
    read_trace,
    replay,
    resolve_trace,
)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000",
        "http://127.8.9.10:1/",
        "http://localhost:8000",
        "http://LOCALHOST",
        "http://[::1]:8000",
        "https://127.0.0.1",
    ],
)
def test_loopback_targets_are_accepted(url: str) -> None:
    assert check_target(url) == url.rstrip("/")


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1:8000",
        "http://0.0.0.0:8000",
        "http://example.com",
        "http://localhost.example.com",
        "http://128.0.0.1",
        "http://[::2]:80",
        "http://my-svc.llm.svc:8000",
    ],
)
def test_non_loopback_targets_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match="not a loopback address"):
        check_target(url)


@pytest.mark.parametrize("url", ["ftp://127.0.0.1", "127.0.0.1:8000", "http://127.0.0.1/?a=1"])
def test_malformed_targets_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        check_target(url)


def test_is_loopback_host_needs_no_dns() -> None:
    assert is_loopback_host("127.0.0.53")
    assert not is_loopback_host("localhost6")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30.0), ("500ms", 0.5), ("2m", 120.0), ("1h", 3600.0), ("1.5", 1.5), (".5s", 0.5)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert duration_arg(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "-1s", "10x", "s", "1 s 2", "inf", "nan", "-5", "1e3"])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="or a number of seconds"):
        duration_arg(text)


def _write_trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,0\n"
        "2023-11-16 18:15:46.1805900,10,5\n"
    )
    return path


def test_read_trace_sorts_rows_and_keeps_sub_microsecond_offsets(tmp_path: Path) -> None:
    rows = read_trace(_write_trace(tmp_path))
    assert [(r.prompt_tokens, r.output_tokens) for r in rows] == [(10, 5), (374, 44), (396, 1)]
    assert [r.offset for r in rows] == pytest.approx([0.0, 0.5, 4.814579])


def test_replay_compresses_time_by_the_rate_multiplier(tmp_path: Path) -> None:
    rows = read_trace(_write_trace(tmp_path))
    arrivals = list(replay(rows, 2.0))
    assert arrivals[1] == Arrival(0.25, 374, 44)
    assert bounded(iter(arrivals), duration=1.0, max_requests=None) == arrivals[:2]
    assert bounded(iter(arrivals), duration=100.0, max_requests=1) == arrivals[:1]


def test_poisson_arrivals_are_seeded_and_have_the_requested_rate() -> None:
    a = bounded(poisson(50.0, [(10, 2), (20, 3)], random.Random(1)), 100.0, None)
    b = bounded(poisson(50.0, [(10, 2), (20, 3)], random.Random(1)), 100.0, None)
    assert a == b
    assert len(a) == pytest.approx(5000, rel=0.05)
    assert [(x.prompt_tokens, x.max_tokens) for x in a[:3]] == [(10, 2), (20, 3), (10, 2)]
    assert all(later.offset > earlier.offset for earlier, later in itertools.pairwise(a))


def test_resolve_trace_by_name_via_env_and_refuses_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "azure-llm-2023-conv.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    monkeypatch.setenv("VLLM_OPERATOR_TRACES_DIR", str(tmp_path))
    assert resolve_trace("conv") == tmp_path / "azure-llm-2023-conv.csv"
    with pytest.raises(ValueError, match="not found"):
        resolve_trace("code")
    with pytest.raises(ValueError, match="does not exist"):
        resolve_trace(str(tmp_path / "nope.csv"))
