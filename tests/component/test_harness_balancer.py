"""The harness's loopback balancer against real HTTP backends on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from aiohttp import web

from vllm_twin.harness.balancer import Balancer


@asynccontextmanager
async def backend(name: str, status: int = 200, delay: float = 0.0) -> AsyncIterator[str]:
    async def handle(request: web.Request) -> web.Response:
        await request.read()
        await asyncio.sleep(delay)
        return web.json_response({"from": name}, status=status)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def post(session: aiohttp.ClientSession, url: str) -> tuple[int, dict[str, str]]:
    async with session.post(url + "/v1/completions", json={"prompt": "hi"}) as resp:
        body: dict[str, str] = await resp.json()
        return resp.status, body


def test_routes_to_backends_passes_503_through_and_says_when_there_is_none() -> None:
    async def main() -> None:
        lb = Balancer("team-a/chat")
        url = await lb.start()
        try:
            async with aiohttp.ClientSession() as s, backend("a") as a, backend("b", 503) as b:
                status, body = await post(s, url)
                assert status == 503 and "no ready backend" in str(body)
                lb.set_backends({"pod-a": a})
                assert await post(s, url) == (200, {"from": "a"})
                lb.set_backends({"pod-b": b})  # vLLM's own 503 reaches the client unchanged
                assert await post(s, url) == (503, {"from": "b"})
        finally:
            await lb.stop()

    asyncio.run(main())


def test_backends_replaced_mid_request_neither_break_it_nor_the_address() -> None:
    async def main() -> None:
        lb = Balancer("team-a/chat")
        url = await lb.start()
        try:
            async with (
                aiohttp.ClientSession() as s,
                backend("old", delay=0.3) as old,
                backend("new") as new,
            ):
                lb.set_backends({"pod-old": old})
                slow = asyncio.create_task(post(s, url))
                await asyncio.sleep(0.1)  # the request is with the old pod now
                lb.set_backends({})  # a rollout: the old pod went away first
                lb.set_backends({"pod-new": new})
                assert await slow == (200, {"from": "old"})
                assert await post(s, url) == (200, {"from": "new"})
                assert lb.outstanding == {"pod-new": 0}
        finally:
            await lb.stop()

    asyncio.run(main())


def test_terminating_backends_serve_only_while_no_backend_is_ready() -> None:
    async def main() -> None:
        lb = Balancer("team-a/chat")
        url = await lb.start()
        try:
            async with aiohttp.ClientSession() as s, backend("old") as old, backend("new") as new:
                # a surge rollout on kwok: the old pod is deleted before the new twin answers
                lb.set_backends({}, terminating={"pod-old": old})
                assert await post(s, url) == (200, {"from": "old"})
                lb.set_backends({"pod-new": new}, terminating={"pod-old": old})
                assert [await post(s, url) for _ in range(3)] == [(200, {"from": "new"})] * 3
                lb.set_backends({"pod-new": new})
                assert lb.outstanding == {"pod-new": 0}
        finally:
            await lb.stop()

    asyncio.run(main())


def test_the_least_loaded_backend_wins_and_ties_are_taken_in_turn() -> None:
    lb = Balancer("ns/svc")
    lb.set_backends({"a": "http://a", "b": "http://b", "c": "http://c"})
    lb.outstanding.update({"a": 2, "b": 0, "c": 1})
    assert {lb._pick() for _ in range(5)} == {"b"}
    lb.outstanding.update({"a": 1, "b": 1, "c": 1})
    picks = [lb._pick() for _ in range(6)]
    assert sorted(picks) == ["a", "a", "b", "b", "c", "c"], picks
    lb.outstanding.update({"a": 0, "b": 3, "c": 0})
    assert sorted(lb._pick() for _ in range(4)) == ["a", "a", "c", "c"]


def test_a_pod_moving_to_terminating_keeps_its_count_of_requests_in_flight() -> None:
    lb = Balancer("team-a/chat")
    lb.set_backends({"old": "http://127.0.0.1:1"})
    lb.outstanding["old"] = 2  # two requests on their way, as _handle counts them
    lb.set_backends({})  # the harness drops the pod from the ready ones first
    lb.set_backends({"new": "http://127.0.0.1:2"}, terminating={"old": "http://127.0.0.1:1"})
    assert lb.outstanding == {"old": 2, "new": 0}
    lb.outstanding["old"] = 0  # both answered
    lb.set_backends({"new": "http://127.0.0.1:2"})
    assert lb.outstanding == {"new": 0}
