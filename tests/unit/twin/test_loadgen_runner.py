"""The open-loop runner against small aiohttp servers started by the test on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web

from vllm_twin.loadgen.backoff import RetryPolicy
from vllm_twin.loadgen.runner import LoadSpec, run_load
from vllm_twin.loadgen.trace import Arrival

Handler = Callable[[web.Request], Any]


@asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/v1/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def streaming_handler(seen: list[dict[str, Any]], tokens: int = 3) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append(body)
        resp = web.StreamResponse()
        resp.content_type = "text/event-stream"
        await resp.prepare(request)
        for _ in range(tokens):
            chunk = {"choices": [{"index": 0, "text": " tok", "finish_reason": None}]}
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
        usage = {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": tokens}}
        await resp.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
        await resp.write_eof()
        return resp

    return handle


def test_streamed_requests_are_timed_and_counted() -> None:
    seen: list[dict[str, Any]] = []

    async def main() -> list[Any]:
        async with serve(streaming_handler(seen)) as url:
            spec = LoadSpec(
                targets=(url,),
                arrivals=(Arrival(0.0, 4, 3), Arrival(0.01, 6, 3)),
                stream=True,
            )
            return await run_load(spec)

    outcomes = asyncio.run(main())
    assert [o.status for o in outcomes] == [200, 200]
    assert [o.output_tokens for o in outcomes] == [3, 3]
    assert all(o.ttft is not None and 0 <= o.ttft <= o.e2e for o in outcomes)
    assert [len(o.itls) for o in outcomes] == [2, 2]
    # the prompt convention: one whitespace-separated word per prompt token
    assert sorted(len(b["prompt"].split()) for b in seen) == [4, 6]
    assert all(b["max_tokens"] == 3 and b["stream"] is True for b in seen)
    assert all(b["stream_options"] == {"include_usage": True} for b in seen)


def test_attempts_go_round_robin_over_targets() -> None:
    seen_a: list[dict[str, Any]] = []
    seen_b: list[dict[str, Any]] = []

    async def main() -> None:
        async with (
            serve(streaming_handler(seen_a)) as a,
            serve(streaming_handler(seen_b)) as b,
        ):
            arrivals = tuple(Arrival(i * 0.001, 1, 3) for i in range(5))
            await run_load(LoadSpec(targets=(a, b), arrivals=arrivals, stream=True))

    asyncio.run(main())
    assert (len(seen_a), len(seen_b)) == (3, 2)


def overloaded_handler(rejections: int) -> tuple[Handler, list[int]]:
    calls = [0]

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        calls[0] += 1
        if calls[0] <= rejections:
            return web.json_response({"error": {"code": 503}}, status=503)
        return web.json_response({"usage": {"prompt_tokens": 1, "completion_tokens": 5}})

    return handle, calls


@pytest.mark.parametrize(
    ("retry", "status", "attempts", "rejections"),
    [
        (None, 503, 1, 1),
        (RetryPolicy(deadline=5.0, base=0.01, cap=0.02), 200, 3, 2),
        (RetryPolicy(deadline=0.0, base=0.01, cap=0.02), 503, 1, 1),
    ],
)
def test_503_is_retried_only_with_a_policy_and_within_its_deadline(
    retry: RetryPolicy | None, status: int, attempts: int, rejections: int
) -> None:
    handler, calls = overloaded_handler(rejections=2)

    async def main() -> list[Any]:
        async with serve(handler) as url:
            spec = LoadSpec(
                targets=(url,), arrivals=(Arrival(0.0, 1, 5),), stream=False, retry=retry
            )
            return await run_load(spec)

    (o,) = asyncio.run(main())
    assert (o.status, o.attempts, o.rejections, calls[0]) == (
        status,
        attempts,
        rejections,
        attempts,
    )
    assert o.output_tokens == (5 if status == 200 else 0)
    assert o.ttft is None


def test_a_stopped_schedule_sends_nothing_more_and_finishes_what_it_sent() -> None:
    seen: list[dict[str, Any]] = []
    checks: list[int] = []
    arrivals = tuple(Arrival(float(t), 4, 3) for t in range(4))

    def stopped() -> bool:  # true from the third arrival on
        checks.append(1)
        return len(checks) > 2

    async def main() -> list[Any]:
        async with serve(streaming_handler(seen)) as url:
            spec = LoadSpec(targets=(url,), arrivals=arrivals, stream=True, time_scale=1000.0)
            return await run_load(spec, stopped=stopped)

    outcomes = asyncio.run(main())
    assert [o.status for o in outcomes] == [200, 200]
    assert len(seen) == 2 and len(checks) == 3


def test_connection_errors_are_reported_not_raised() -> None:
    async def main() -> list[Any]:
        async with serve(streaming_handler([])) as url:
            pass  # closed again: nothing listens on that port any more
        return await run_load(LoadSpec(targets=(url,), arrivals=(Arrival(0.0, 1, 1),)))

    (o,) = asyncio.run(main())
    assert o.status is None and o.error is not None


def test_time_scale_stretches_measured_latency_back_to_target_seconds() -> None:
    async def slow(request: web.Request) -> web.Response:
        await request.read()
        await asyncio.sleep(0.05)  # the server's simulated work, in wall time
        return web.json_response({"usage": {"completion_tokens": 1}})

    async def main() -> list[Any]:
        async with serve(slow) as url:
            spec = LoadSpec(
                targets=(url,), arrivals=(Arrival(0.0, 1, 1),), stream=False, time_scale=10.0
            )
            return await run_load(spec)

    (o,) = asyncio.run(main())
    assert o.e2e >= 0.5


def test_non_loopback_targets_are_refused_before_any_request() -> None:
    with pytest.raises(ValueError, match="loopback"):
        LoadSpec(targets=("http://10.1.2.3:8000",), arrivals=())
