"""docs/clients.md, run: the real `openai` package and the page's backoff helper against a twin on
127.0.0.1 whose queue cap (2 in flight) is far below the burst sent at it.

What is shown: first attempts are refused with vLLM's 503; every request then succeeds on a retry
within its total deadline; and the retries of requests refused at the same moment are spread
over the jitter window rather than sent together. The random draws are seeded, so the waits are
the same on every run.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2
import openai
import requests

from tests.component.test_twin_http import BUSY, MODEL, twin

DOCS = Path(__file__).resolve().parents[2] / "docs" / "clients.md"
# 2 requests in flight at most, each long enough (TOKENS at time scale 50: ~0.2 s of wall time)
# that a burst of BURST simultaneous requests finds the queue full even on a busy machine
OVERLOADED = ["--max-num-seqs", "2", "--max-num-queued-reqs", "2"]
TOKENS = 512
BURST = 32
DEADLINE = 30.0


def docs_helper() -> Any:
    """The backoff helper exactly as docs/clients.md prints it."""
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), flags=re.S)
    (source,) = [b for b in blocks if "def post_with_backoff" in b]
    namespace: dict[str, Any] = {}
    exec(compile(source, str(DOCS), "exec"), namespace)
    return namespace["post_with_backoff"]


def spread(times: list[float]) -> float:
    return max(times) - min(times)


def test_openai_sdk_retries_503_with_jitter_within_the_deadline() -> None:
    asyncio.run(sdk_burst())


async def sdk_burst() -> None:
    random.seed(503)  # the SDK draws its jitter from the random module
    attempts: dict[str, list[tuple[int, float, float]]] = defaultdict(
        list
    )  # id -> (status, sent, answered)
    sent: dict[int, float] = {}

    async def on_request(request: httpx2.Request) -> None:
        sent[id(request)] = time.monotonic()

    async def on_response(response: httpx2.Response) -> None:
        key = response.request.headers["x-test-request"]
        attempts[key].append((response.status_code, sent[id(response.request)], time.monotonic()))
        if response.status_code == 503:
            await response.aread()
            assert response.json()["error"]["message"] == BUSY
            assert "retry-after" not in response.headers

    async with twin(*OVERLOADED) as (_, base):
        http = openai.DefaultAsyncHttpxClient(
            event_hooks={"request": [on_request], "response": [on_response]}
        )
        client = openai.AsyncOpenAI(
            base_url=f"{base}/v1", api_key="unused", max_retries=6, timeout=60.0, http_client=http
        )

        async def one(i: int) -> float:
            start = time.monotonic()
            async with asyncio.timeout(DEADLINE):
                out = await client.completions.create(
                    model=MODEL,
                    prompt="hello",
                    max_tokens=TOKENS,
                    extra_headers={"x-test-request": str(i)},
                )
            assert out.choices[0].text
            return time.monotonic() - start

        durations = await asyncio.gather(*(one(i) for i in range(BURST)))
        await client.close()

    assert all(d < DEADLINE for d in durations)
    refused = {k: a for k, a in attempts.items() if a[0][0] == 503}
    assert len(refused) >= BURST // 4, {k: [s for s, *_ in a] for k, a in attempts.items()}
    for history in attempts.values():  # every request ended well, after its 503s
        assert [s for s, *_ in history][-1] == 200
        assert all(s == 503 for s, *_ in history[:-1])
    # the first retries: 0.5 s shortened by 0-25 % after the 503 (never at once) ...
    waits = [a[1][1] - a[0][2] for a in refused.values()]
    assert min(waits) >= 0.375 - 0.01, waits
    # ... and spread: requests refused within a few ms of each other retry over ~0.1 s
    first_refusals = [a[0][2] for a in refused.values()]
    first_retries = [a[1][1] for a in refused.values()]
    assert spread(first_retries) > 0.05 + spread(first_refusals), (first_refusals, first_retries)


def test_the_docs_backoff_helper_retries_503_with_full_jitter() -> None:
    asyncio.run(helper_burst())


async def helper_burst() -> None:
    post_with_backoff = docs_helper()
    random.seed(504)
    statuses: dict[int, list[tuple[int, float]]] = defaultdict(list)

    def call(i: int, url: str) -> tuple[int, float]:
        with requests.Session() as session:
            session.hooks["response"].append(
                lambda r, *_, **__: statuses[i].append((r.status_code, time.monotonic()))
            )
            start = time.monotonic()
            response = post_with_backoff(
                session,
                url,
                {"model": MODEL, "prompt": "hello", "max_tokens": TOKENS},
                deadline=DEADLINE,
                base=0.5,
                cap=4.0,
            )
            return response.status_code, time.monotonic() - start

    loop = asyncio.get_running_loop()
    async with twin(*OVERLOADED) as (_, base):
        url = f"{base}/v1/completions"
        with ThreadPoolExecutor(max_workers=BURST) as pool:  # the whole burst at once
            results = await asyncio.gather(
                *(loop.run_in_executor(pool, call, i, url) for i in range(BURST))
            )

    assert [status for status, _ in results] == [200] * BURST
    assert all(duration < DEADLINE for _, duration in results)
    refused = {i: s for i, s in statuses.items() if s[0][0] == 503}
    assert len(refused) >= BURST // 4, statuses
    # full jitter: the first retries land anywhere in [0, 0.5 s) after the refusal
    waits = [s[1][1] - s[0][1] for s in refused.values()]
    assert spread(waits) > 0.1, waits
