"""One /v1/completions attempt against a twin (or vLLM), timed from the client side.

Prompt convention shared with the twin: the prompt is `prompt_tokens` whitespace-separated words,
and the twin counts one token per word (docs/twin.md). Streamed answers are read as OpenAI SSE
(`data: {...}` lines ending with `data: [DONE]`); the usage chunk, when present, gives the exact
completion token count.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

PROMPT_WORD = "tok"


def synthetic_prompt(tokens: int) -> str:
    return " ".join([PROMPT_WORD] * tokens)


def completion_body(
    prompt_tokens: int, max_tokens: int, stream: bool, model: str | None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "prompt": synthetic_prompt(prompt_tokens),
        "max_tokens": max_tokens,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    if model is not None:
        body["model"] = model
    return body


@dataclass(frozen=True)
class Attempt:
    status: int | None  # None: no HTTP answer (connection refused, reset, timeout)
    output_tokens: int = 0
    chunk_times: tuple[float, ...] = ()  # clock time of each streamed chunk that carried text
    error: str | None = None
    finish_reason: str | None = None  # of the first choice; "abort": vLLM cut it (a shutdown)


def _chunk_text(payload: dict[str, Any]) -> str:
    choices = payload.get("choices") or []
    if not choices:
        return ""
    first = choices[0]
    text = first.get("text")
    if text is None:  # chat chunk
        text = (first.get("delta") or {}).get("content")
    return text or ""


async def _read_stream(resp: aiohttp.ClientResponse, clock: Callable[[], float]) -> Attempt:
    times: list[float] = []
    words = 0
    usage_tokens: int | None = None
    finish: str | None = None
    async for raw in resp.content:
        line = raw.decode("utf-8").strip()
        if not line.startswith("data:"):
            continue
        data = line[len("data:") :].strip()
        if data == "[DONE]":
            break
        payload = json.loads(data)
        if usage := payload.get("usage"):
            usage_tokens = int(usage["completion_tokens"])
        for choice in payload.get("choices") or []:
            finish = choice.get("finish_reason") or finish
        text = _chunk_text(payload)
        if text:
            times.append(clock())
            words += len(text.split())
    tokens = usage_tokens if usage_tokens is not None else words
    return Attempt(
        status=resp.status, output_tokens=tokens, chunk_times=tuple(times), finish_reason=finish
    )


async def send_completion(
    session: aiohttp.ClientSession,
    base_url: str,
    body: dict[str, Any],
    clock: Callable[[], float],
    timeout_s: float,
) -> Attempt:
    """POST one completion; never raises for HTTP or connection failures, it reports them."""
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with session.post(f"{base_url}/v1/completions", json=body, timeout=timeout) as resp:
            if resp.status != 200:
                text = await resp.text()
                return Attempt(status=resp.status, error=text[:200])
            if body.get("stream"):
                return await _read_stream(resp, clock)
            payload = await resp.json()
            choices = payload.get("choices") or [{}]
            return Attempt(
                status=200,
                output_tokens=int(payload["usage"]["completion_tokens"]),
                finish_reason=choices[0].get("finish_reason"),
            )
    except (aiohttp.ClientError, TimeoutError) as exc:
        return Attempt(status=None, error=f"{type(exc).__name__}: {exc}")
