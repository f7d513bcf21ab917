"""The twin's SIGTERM as vLLM 0.33's (docs/rollouts.md §1.2): drain with --shutdown-timeout,
abort without it, and abort what arrives after SIGTERM.

A time scale of 10 keeps a 600-token answer to a fraction of a second of wall time while it is
still long enough to be in flight when the shutdown starts.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp

from tests.component.test_twin_http import MODEL, spawn_twin, wait_healthy
from vllm_twin.argv import parse_vllm_argv
from vllm_twin.server.app import build_app, start_server
from vllm_twin.server.driver import EngineDriver
from vllm_twin.server.setup import build_engine, serve_options_from
from vllm_twin.server.state import STATE

LONG = {"prompt": "a b c d", "max_tokens": 600}


@asynccontextmanager
async def twin(*argv: str) -> AsyncIterator[tuple[aiohttp.ClientSession, str, EngineDriver]]:
    args = parse_vllm_argv([MODEL, "--time-scale", "10", *argv], {})
    app = build_app(build_engine(args).engine, serve_options_from(args))
    runner, port = await start_server(app, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            await wait_healthy(session, base)
            yield session, base, app[STATE].driver
    finally:
        await runner.cleanup()


async def complete(s: aiohttp.ClientSession, base: str, body: dict[str, Any]) -> dict[str, Any]:
    async with s.post(f"{base}/v1/completions", json=body) as r:
        assert r.status == 200
        out: dict[str, Any] = await r.json()
        return out


async def until(check: Any, within: float = 10.0) -> None:
    """Wait on a condition of the in-process driver."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"not true after {within}s: {check}")
        await asyncio.sleep(0.005)


def test_drain_finishes_in_flight_work_and_aborts_what_arrives_after_sigterm() -> None:
    async def main() -> None:
        async with twin("--shutdown-timeout", "60") as (s, base, driver):
            running = asyncio.create_task(complete(s, base, LONG))
            await until(lambda: driver.active == 1)
            drain = asyncio.create_task(driver.drain(60))
            await until(lambda: driver.draining)
            late = await complete(s, base, {"prompt": "x", "max_tokens": 5})
            assert late["choices"][0]["finish_reason"] == "abort"
            assert late["usage"]["completion_tokens"] == 0
            done = await running
            assert done["choices"][0]["finish_reason"] == "length"
            assert done["usage"]["completion_tokens"] == 600
            assert await drain == 0  # nothing was left to cut

    asyncio.run(asyncio.wait_for(main(), timeout=60))


def test_timeout_zero_aborts_in_flight_requests_at_once() -> None:
    async def main() -> None:
        async with twin() as (s, base, driver):  # vLLM's default: --shutdown-timeout 0
            running = asyncio.create_task(complete(s, base, LONG))
            await until(lambda: driver.active == 1)
            assert await driver.drain(0) == 1
            cut = await running
            assert cut["choices"][0]["finish_reason"] == "abort"
            assert cut["usage"]["completion_tokens"] < 600

    asyncio.run(asyncio.wait_for(main(), timeout=60))


def test_a_drain_that_outlasts_its_timeout_aborts_the_rest() -> None:
    async def main() -> None:
        async with twin() as (s, base, driver):
            running = asyncio.create_task(complete(s, base, LONG))
            await until(lambda: driver.active == 1)
            # 0.5 virtual s (0.05 s wall) is far less than 600 tokens take
            assert await driver.drain(0.5) == 1
            assert (await running)["choices"][0]["finish_reason"] == "abort"

    asyncio.run(asyncio.wait_for(main(), timeout=60))


def test_twin_process_on_sigterm_finishes_a_stream_then_exits() -> None:
    async def main() -> None:
        proc, base = await spawn_twin(MODEL, "--shutdown-timeout", "60", time_scale="10")
        try:
            assert proc.stderr is not None
            finish: list[str] = []
            async with aiohttp.ClientSession() as s:
                await wait_healthy(s, base)
                body = {**LONG, "stream": True}
                async with s.post(f"{base}/v1/completions", json=body) as r:
                    signalled = False
                    async for raw in r.content:
                        data = raw.decode().removeprefix("data:").strip()
                        if not data or data == "[DONE]":
                            continue
                        if not signalled:  # the first chunk: the request is in flight
                            proc.send_signal(signal.SIGTERM)
                            signalled = True
                        finish += [c["finish_reason"] for c in json.loads(data)["choices"]]
            assert finish[-1] == "length"
            assert await asyncio.wait_for(proc.wait(), timeout=20) == 0
            err = (await proc.stderr.read()).decode()
            assert "shutdown: mode=drain timeout=60s, 1 requests in flight" in err
            assert "shutdown: 0 in-flight requests aborted" in err
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    asyncio.run(main())
