"""The twin's HTTP surface against the real engine, on an ephemeral 127.0.0.1 port.

Most tests run the server in-process (fast, and the test can reach the registry); the lifecycle
test runs `python -m vllm_twin.commands.twin` as a process, as the e2e harness does. A high
--time-scale keeps each simulated request to milliseconds of wall time.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from vllm_twin.argv import parse_vllm_argv
from vllm_twin.cli import main as cli_main
from vllm_twin.commands import twin as twin_command
from vllm_twin.server.app import build_app, start_server
from vllm_twin.server.setup import build_engine, serve_options_from

MODEL = "Qwen/Qwen2.5-7B-Instruct"
FAST = ["--time-scale", "50"]
BUSY = (
    "The engine is currently busy and cannot accept new requests. Please try again later or "
    "on a different instance."
)
ROOT = Path(__file__).resolve().parents[2]


async def wait_healthy(session: aiohttp.ClientSession, base: str, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    last: object = None
    while time.monotonic() < deadline:
        try:
            async with session.get(f"{base}/health") as resp:
                if resp.status == 200:
                    return
                last = resp.status
        except aiohttp.ClientError as exc:
            last = exc
        await asyncio.sleep(0.05)
    raise AssertionError(f"twin at {base} not healthy after {within}s; last: {last!r}")


@asynccontextmanager
async def twin(
    *argv: str, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    """An in-process twin for `vllm serve` argv, and a client session pointed at it."""
    args = parse_vllm_argv([MODEL, *FAST, *argv], env or {})
    setup = build_engine(args)
    app = build_app(setup.engine, serve_options_from(args))
    runner, port = await start_server(app, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            await wait_healthy(session, base)
            yield session, base
    finally:
        await runner.cleanup()


async def scrape(session: aiohttp.ClientSession, base: str) -> str:
    async with session.get(f"{base}/metrics") as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"] == "text/plain; version=1.0.0; charset=utf-8"
        return await resp.text()


def sample(text: str, series: str) -> float:
    """The value of one exact series line (`name{labels}`) in exposition text."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{series} not in /metrics")


ME = f'model_name="{MODEL}",engine="0"'


async def read_sse(resp: aiohttp.ClientResponse) -> list[Any]:
    """Payloads of an SSE stream, `[DONE]` included as the string."""
    out: list[Any] = []
    async for raw in resp.content:
        line = raw.decode().strip()
        if line.startswith("data: "):
            data = line[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_probes_models_and_version() -> None:
    async def main() -> None:
        async with twin("--served-model-name", "chat", "chat-b") as (s, base):
            async with s.get(f"{base}/health") as r:
                assert (r.status, await r.read()) == (200, b"")
            for method in ("GET", "POST"):
                async with s.request(method, f"{base}/ping") as r:
                    assert r.status == 200
            async with s.get(f"{base}/version") as r:
                assert await r.json() == {"version": "0.33.0"}
            async with s.get(f"{base}/v1/models") as r:
                body = await r.json()
            assert [m["id"] for m in body["data"]] == ["chat", "chat-b"]
            assert {m["root"] for m in body["data"]} == {MODEL}
            assert body["data"][0]["max_model_len"] == 32768

    asyncio.run(main())


def test_non_streamed_completions_return_max_tokens_and_usage() -> None:
    async def main() -> None:
        async with twin() as (s, base):
            body = {"prompt": "one two three four five", "max_tokens": 7}
            async with s.post(f"{base}/v1/completions", json=body) as r:
                assert r.status == 200
                out = await r.json()
            assert out["object"] == "text_completion"
            assert out["model"] == MODEL
            assert out["usage"] == {
                "prompt_tokens": 5,
                "total_tokens": 12,
                "completion_tokens": 7,
                "prompt_tokens_details": None,
            }
            (choice,) = out["choices"]
            assert len(choice["text"].split()) == 7
            assert choice["finish_reason"] == "length"

            token_ids = {"prompt": list(range(40)), "max_tokens": 3, "n": 2}
            async with s.post(f"{base}/v1/completions", json=token_ids) as r:
                out = await r.json()
            assert [c["index"] for c in out["choices"]] == [0, 1]
            assert out["usage"]["prompt_tokens"] == 40
            assert out["usage"]["completion_tokens"] == 6

            chat = {"messages": [{"role": "user", "content": "hi there you"}], "max_tokens": 4}
            async with s.post(f"{base}/v1/chat/completions", json=chat) as r:
                out = await r.json()
            assert out["object"] == "chat.completion"
            assert out["choices"][0]["message"]["role"] == "assistant"
            assert len(out["choices"][0]["message"]["content"].split()) == 4
            assert (out["usage"]["prompt_tokens"], out["usage"]["completion_tokens"]) == (3, 4)

    asyncio.run(main())


def test_streamed_completions_carry_every_token_then_usage_then_done() -> None:
    async def main() -> None:
        async with twin() as (s, base):
            body = {
                "prompt": "a b c",
                "max_tokens": 9,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            async with s.post(f"{base}/v1/completions", json=body) as r:
                assert r.status == 200
                assert r.headers["Content-Type"].startswith("text/event-stream")
                chunks = await read_sse(r)
            assert chunks[-1] == "[DONE]"
            usage = chunks[-2]
            assert usage["choices"] == []
            assert usage["usage"]["completion_tokens"] == 9
            texts = [c["choices"][0]["text"] for c in chunks[:-2]]
            assert sum(len(t.split()) for t in texts) == 9
            assert chunks[-3]["choices"][0]["finish_reason"] == "length"
            assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-3])

            chat = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 2, "stream": True}
            async with s.post(f"{base}/v1/chat/completions", json=chat) as r:
                chunks = await read_sse(r)
            assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
            assert chunks[0]["object"] == "chat.completion.chunk"
            words = sum(len(c["choices"][0]["delta"]["content"].split()) for c in chunks[1:-1])
            assert (words, chunks[-1]) == (2, "[DONE]")

    asyncio.run(main())


def test_stream_interval_groups_tokens_per_chunk() -> None:
    async def main() -> None:
        # real time, so that steps reach the handler one by one ([3, 3, 1] unless the loop lags;
        # a lagging consumer gets merged outputs, as vLLM's output collector merges them)
        async with twin("--stream-interval", "3", "--time-scale", "1") as (s, base):
            body = {"prompt": "a", "max_tokens": 7, "stream": True}
            async with s.post(f"{base}/v1/completions", json=body) as r:
                chunks = await read_sse(r)
            sizes = [len(c["choices"][0]["text"].split()) for c in chunks[:-1]]
            assert sum(sizes) == 7
            assert all(size >= 3 for size in sizes[:-1]), sizes
            assert sizes[-1] >= 1

    asyncio.run(main())


def test_overload_answers_vllms_503_and_counts_it() -> None:
    async def one(s: aiohttp.ClientSession, base: str) -> tuple[int, bytes, Any]:
        body = {"prompt": "w " * 100, "max_tokens": 256}
        async with s.post(f"{base}/v1/completions", json=body) as r:
            return r.status, await r.read(), r.headers

    async def main() -> None:
        async with twin("--max-num-queued-reqs", "1") as (s, base):
            results = await asyncio.gather(*(one(s, base) for _ in range(8)))
            text = await scrape(s, base)
        statuses = [status for status, _, _ in results]
        ok, rejected = statuses.count(200), statuses.count(503)
        assert ok >= 1 and rejected >= 1 and ok + rejected == 8
        for status, body, headers in results:
            if status == 503:
                assert body == (
                    b'{"error":{"message":"' + BUSY.encode() + b'","type":"Service Unavailable",'
                    b'"param":null,"code":503}}'
                )
                assert "Retry-After" not in headers
                assert headers["Content-Type"].startswith("application/json")
        reason = 'reason="max_num_queued_reqs"'
        assert sample(
            text, f'vllm:admission_rejections_total{{model_name="{MODEL}",{reason}}}'
        ) == (rejected)
        tokens_reason = 'reason="max_num_queued_tokens"'
        assert (
            sample(text, f'vllm:admission_rejections_total{{model_name="{MODEL}",{tokens_reason}}}')
            == 0
        )
        http = 'http_requests_total{method="POST",status="%s",handler="/v1/completions"}'
        assert sample(text, http % "5xx") == rejected
        assert sample(text, http % "2xx") == ok
        # rejected requests never reach the engine; every completed one was observed once
        assert sample(text, f"vllm:time_to_first_token_seconds_count{{{ME}}}") == ok
        assert sample(text, f"vllm:e2e_request_latency_seconds_count{{{ME}}}") == ok
        assert sample(text, f'vllm:request_success_total{{{ME},finished_reason="length"}}') == ok
        assert sample(text, f"vllm:generation_tokens_total{{{ME}}}") == 256 * ok
        assert sample(text, f"vllm:request_prompt_tokens_sum{{{ME}}}") == 100 * ok
        assert sample(text, f"vllm:num_requests_running{{{ME}}}") == 0
        # the probes are not instrumented
        assert 'handler="/health"' not in text and 'handler="/metrics"' not in text

    asyncio.run(main())


def test_streaming_requests_are_rejected_before_any_chunk() -> None:
    async def main() -> None:
        async with twin("--max-num-queued-reqs", "0") as (s, base):
            body = {"prompt": "a", "max_tokens": 2, "stream": True}
            async with s.post(f"{base}/v1/completions", json=body) as r:
                assert r.status == 503
                assert (await r.json())["error"]["type"] == "Service Unavailable"

    asyncio.run(main())


def test_bad_requests() -> None:
    async def main() -> None:
        async with twin("--max-model-len", "64") as (s, base):
            too_long = {"prompt": "w " * 65, "max_tokens": 1}
            async with s.post(f"{base}/v1/completions", json=too_long) as r:
                assert r.status == 400
                err = (await r.json())["error"]
            assert err["message"].startswith("This model's maximum context length is 64 tokens.")
            assert (err["code"], err["param"]) == (400, "input_tokens")
            # one that fills the context leaves no room: vLLM's SamplingParams refuses max_tokens 0
            filled = {"prompt": "w " * 64, "max_tokens": 1}
            async with s.post(f"{base}/v1/completions", json=filled) as r:
                assert r.status == 400
                err = (await r.json())["error"]
            assert err["message"] == (
                "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)"
            )
            async with s.post(f"{base}/v1/completions", json={"prompt": "a", "model": "x"}) as r:
                assert r.status == 404
                assert (await r.json())["error"]["message"] == "The model `x` does not exist."
            async with s.post(f"{base}/v1/completions", data=b"{nope") as r:
                assert r.status == 400
            async with s.post(f"{base}/v1/completions", json={"prompt": "a", "max_tokens": 0}) as r:
                assert r.status == 400
            async with s.get(f"{base}/nowhere") as r:
                assert r.status == 404
            text = await scrape(s, base)
            assert (
                sample(
                    text,
                    'http_requests_total{method="POST",status="4xx",handler="/v1/completions"}',
                )
                == 5
            )
            assert (
                sample(text, 'http_requests_total{method="GET",status="4xx",handler="none"}') == 1
            )

    asyncio.run(main())


def test_bodies_vllm_parses_and_errors_in_vllms_json_shape() -> None:
    """What aiohttp would answer in plain text or a 500 is answered as vLLM does."""

    async def main() -> None:
        async with twin() as (s, base):
            url = f"{base}/v1/completions"
            nested = b'{"prompt": "a", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
            headers = {"Content-Type": "application/json"}
            async with s.post(url, data=nested, headers=headers) as r:
                assert r.status == 400
                assert (await r.json())["error"]["message"] == "There was an error parsing the body"
            # the charset parameter is not read: the bytes are JSON, as for Starlette
            odd = {"Content-Type": "application/json; charset=bogus"}
            async with s.post(url, data=b'{"prompt": "a", "max_tokens": 1}', headers=odd) as r:
                assert r.status == 200
            # one word of 2 MB is one token: over aiohttp's 1 MiB default, within the context
            async with s.post(url, json={"prompt": "x" * 2_000_000, "max_tokens": 1}) as r:
                assert r.status == 200
            async with s.post(url, json={"prompt": "a", "n": 10**30}) as r:
                assert r.status == 400
                assert (await r.json())["error"]["message"].startswith("n must be at most 16384")
            async with s.get(f"{base}/nowhere") as r:
                assert r.status == 404 and r.content_type == "application/json"
                assert await r.json() == {
                    "error": {"message": "Not Found", "type": "Not Found", "param": None,
                              "code": 404}
                }  # fmt: skip
            async with s.get(url) as r:
                assert r.status == 405 and "POST" in r.headers["Allow"]
                assert (await r.json())["error"]["type"] == "Method Not Allowed"
            # and it still serves, with nothing left running
            async with s.post(url, json={"prompt": "a", "max_tokens": 2}) as r:
                assert r.status == 200
            text = await scrape(s, base)
            assert sample(text, f"vllm:num_requests_running{{{ME}}}") == 0

    asyncio.run(main())


def test_fields_the_twin_does_not_serve_are_typed_and_the_answer_named_as_asked() -> None:
    """A field vLLM types is checked even where the twin does nothing with it; a client's
    X-Request-Id (else the body's request_id) names the answer, as vLLM names it."""

    async def main() -> None:
        async with twin("--max-model-len", "64") as (s, base):
            url = f"{base}/v1/chat/completions"
            chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
            for bad, param in (
                ({"truncation_side": 5}, "truncation_side"),
                ({"tools": []}, "tools"),
                ({"tool_choice": "required"}, "tool_choice"),
                ({"cache_salt": ""}, "cache_salt"),
            ):
                async with s.post(url, json={**chat, **bad}) as r:
                    assert r.status == 400, bad
                    assert (await r.json())["error"]["param"] == param
            served = {**chat, "tools": [{"function": {"name": "f"}}], "request_id": "mine"}
            async with s.post(url, json=served) as r:
                assert r.status == 200
                assert (await r.json())["id"] == "chatcmpl-mine"
            async with s.post(url, json=served, headers={"X-Request-Id": "trace-1"}) as r:
                assert (await r.json())["id"] == "chatcmpl-trace-1"
            # the same id twice at once is two requests, as in vLLM
            twice = [s.post(url, json=served) for _ in range(2)]
            for answer in await asyncio.gather(*(t.__aenter__() for t in twice)):
                assert answer.status == 200 and (await answer.json())["id"] == "chatcmpl-mine"
                answer.release()
            # truncation keeps the prompt within the context instead of a 400
            long = {"prompt": "w " * 100, "max_tokens": 1, "truncate_prompt_tokens": 10}
            async with s.post(f"{base}/v1/completions", json=long) as r:
                assert r.status == 200
                assert (await r.json())["usage"]["prompt_tokens"] == 10

    asyncio.run(main())


def test_client_disconnect_aborts_the_request_in_the_engine() -> None:
    async def main() -> None:
        async with twin("--time-scale", "1") as (s, base):
            body = {"prompt": "a b", "max_tokens": 5000, "stream": True}
            async with s.post(f"{base}/v1/completions", json=body) as r:
                await r.content.readline()  # the stream has started: the request is running
                running = sample(await scrape(s, base), f"vllm:num_requests_running{{{ME}}}")
                assert running == 1
            # leaving the block closed the connection; the engine must drop the request
            deadline = time.monotonic() + 5
            while True:
                text = await scrape(s, base)
                if sample(text, f"vllm:num_requests_running{{{ME}}}") == 0:
                    break
                assert time.monotonic() < deadline, "the aborted request is still running"
                await asyncio.sleep(0.05)
            assert sample(text, f'vllm:request_success_total{{{ME},finished_reason="length"}}') == 0
            assert sample(text, f"vllm:e2e_request_latency_seconds_count{{{ME}}}") == 0

    asyncio.run(main())


def test_disable_log_stats_removes_engine_metrics_only() -> None:
    async def main() -> None:
        async with twin("--disable-log-stats") as (s, base):
            async with s.post(f"{base}/v1/completions", json={"prompt": "a", "max_tokens": 2}) as r:
                assert r.status == 200
            text = await scrape(s, base)
        assert "vllm:" not in text
        assert (
            sample(
                text, 'http_requests_total{method="POST",status="2xx",handler="/v1/completions"}'
            )
            == 1
        )
        assert "http_request_duration_highr_seconds_count 1.0" in text

    asyncio.run(main())


def test_loadgen_against_the_twin_reports_every_request() -> None:
    async def main() -> dict[str, Any]:
        async with twin("--time-scale", "20") as (_, base):
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "vllm_twin.cli", "loadgen",
                "--target", base, "--rate", "20", "--prompt-tokens", "64", "--max-tokens", "8",
                "--duration", "2s", "--max-requests", "10", "--stream", "--time-scale", "20",
                "--seed", "3", "--json",
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            out, err = await asyncio.wait_for(proc.communicate(), timeout=30)
            assert proc.returncode == 0, err.decode()
            report: dict[str, Any] = json.loads(out)
            return report

    report = asyncio.run(main())
    assert (report["requests"], report["succeeded"], report["rejected"]) == (10, 10, 0)
    assert report["ttft"]["count"] == 10
    assert report["tpot"]["count"] == 10
    # at most one gap per token after the first; fewer when the twin's outputs were merged
    assert report["itl"]["count"] <= 10 * 7
    assert report["output_tokens_per_s"] > 0


def test_unknown_flag_and_invalid_config_exit_like_vllm(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["twin", MODEL, "--enable-batching"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: vllm serve")
    assert err.endswith("vllm serve: error: unrecognized arguments: --enable-batching\n")
    rc = twin_command.main([MODEL, "--max-num-seqs", "8", "--max-num-active-seqs", "16"], env={})
    assert rc == 1
    assert capsys.readouterr().err == (
        "ValueError: max_num_active_seqs (16) cannot be greater than max_num_seqs (8).\n"
    )
    assert twin_command.main([MODEL], env={"VLLM_TWIN_GPU": "TPU-v9"}) == 2
    assert "unknown GPU profile 'TPU-v9'" in capsys.readouterr().err


async def spawn_twin(*argv: str, time_scale: str = "50") -> tuple[asyncio.subprocess.Process, str]:
    """`python -m vllm_twin.commands.twin ARGV` on port 0, as the harness starts one; the
    process and the base URL from its ready line (the caller kills it if still running)."""
    env = {**os.environ, "VLLM_TWIN_TIME_SCALE": time_scale, "PYTHONUNBUFFERED": "1"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vllm_twin.commands.twin", *argv, "--port", "0",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=ROOT,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), timeout=15)).decode()
    match = re.search(r"ready on http://127\.0\.0\.1:(\d+)", line)
    assert match, line
    return proc, f"http://127.0.0.1:{match.group(1)}"


def test_twin_process_binds_loopback_serves_and_stops_on_sigterm() -> None:
    async def main() -> None:
        proc, base = await spawn_twin("--model", MODEL, "--host", "0.0.0.0")
        try:
            assert proc.stderr is not None
            async with aiohttp.ClientSession() as s:
                await wait_healthy(s, base)
                async with s.post(f"{base}/v1/completions", json={"prompt": "a"}) as r:
                    assert (await r.json())["usage"]["completion_tokens"] == 16
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), timeout=10) == 0
            err = (await proc.stderr.read()).decode()
            assert "--host 0.0.0.0 ignored: the twin binds 127.0.0.1 only" in err
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    asyncio.run(main())
