"""HTTP handlers of the twin: the OpenAI routes, probes, /version, /v1/models and /metrics."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from vllm_operator.sim.engine import (
    InvalidRequestError,
    Rejected,
    RequestEvent,
    RequestRecord,
    SimRequest,
)
from vllm_twin.exposition import CONTENT_TYPE, Registry
from vllm_twin.server import openai
from vllm_twin.server.driver import EngineDriver

VLLM_VERSION = "0.33.0"


@dataclass(frozen=True)
class ServeOptions:
    model: str  # the model tag vLLM was started with (`root` in /v1/models)
    served_model_names: tuple[str, ...]
    time_scale: float = 1.0
    disable_log_stats: bool = False
    stream_interval: int = 1  # tokens per streamed chunk (--stream-interval)
    api_keys: tuple[str, ...] = ()  # none: no key needed (vLLM without --api-key/VLLM_API_KEY)


@dataclass
class TwinState:
    driver: EngineDriver
    options: ServeOptions
    registry: Registry
    max_model_len: int
    started: int  # unix time, for `created` fields


STATE = web.AppKey("twin_state", TwinState)


def _json(payload: Any, status: int = 200) -> web.Response:
    body = json.dumps(payload, separators=(",", ":")).encode()
    return web.Response(body=body, status=status, content_type="application/json")


def _error(exc: openai.RequestError) -> web.Response:
    return web.Response(body=exc.body(), status=exc.status, content_type="application/json")


async def health(request: web.Request) -> web.Response:
    # like vLLM: 200 with an empty body while the engine lives; overload does not show here
    failed = request.app[STATE].driver.failure is not None
    return web.Response(status=503 if failed else 200)


async def version(request: web.Request) -> web.Response:
    return _json({"version": VLLM_VERSION})


async def models(request: web.Request) -> web.Response:
    state = request.app[STATE]
    data: list[dict[str, Any]] = [
        {
            "id": name,
            "object": "model",
            "created": state.started,
            "owned_by": "vllm",
            "root": state.options.model,
            "parent": None,
            "max_model_len": state.max_model_len,
            "permission": [],
        }
        for name in state.options.served_model_names
    ]
    return _json({"object": "list", "data": data})


async def metrics(request: web.Request) -> web.Response:
    state = request.app[STATE]
    state.driver.sync()  # gauges as of now, not of the last engine wake-up
    return web.Response(
        body=state.registry.render().encode(), headers={"Content-Type": CONTENT_TYPE}
    )


async def completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, chat=False)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, chat=True)


async def _read_work(request: web.Request, chat: bool, state: TwinState) -> openai.WorkRequest:
    try:
        # the bytes, as Starlette parses them for vLLM: a charset in Content-Type is not read
        body = json.loads(await request.read())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise openai.RequestError("the request body is not valid JSON") from None
    except (RecursionError, ValueError):  # nested too deep for the parser, and the like
        raise openai.RequestError("There was an error parsing the body") from None
    if not isinstance(body, dict):
        raise openai.RequestError("the request body must be a JSON object")
    work = openai.parse_work(body, chat=chat, max_model_len=state.max_model_len)
    if work.model is not None and work.model not in state.options.served_model_names:
        raise openai.RequestError(
            f"The model `{work.model}` does not exist.", status=404, param="model"
        )
    return work


async def _generate(request: web.Request, chat: bool) -> web.StreamResponse:
    state = request.app[STATE]
    arrival = state.driver.now()  # vLLM stamps arrival before rendering and tokenization
    try:
        work = await _read_work(request, chat, state)
    except openai.RequestError as exc:
        return _error(exc)
    request_id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
    sim = SimRequest(
        request_id=request_id,
        arrival=arrival,
        prompt_tokens=work.prompt_tokens,
        max_tokens=work.max_tokens,
        priority=work.priority,
        n=work.n,
        chat=chat,
    )
    try:
        outcome = state.driver.submit(sim)
    except InvalidRequestError as exc:
        return _error(openai.RequestError.from_engine(exc))
    if isinstance(outcome, Rejected):
        # exactly vLLM's body; no Retry-After header, as in vLLM
        return web.Response(
            body=openai.overload_body(outcome.message),
            status=503,
            content_type="application/json",
        )
    # answers name the model the client asked for (any served name), else the first one
    model = work.model or state.options.served_model_names[0]
    reply = _Reply(chat, request_id, unix_now(), model, work)
    try:
        if work.stream:
            return await _stream(request, outcome, reply, state.options.stream_interval)
        return await _collect(outcome, reply)
    finally:
        # the client went away (cancelled handler, reset stream) or we are done: a no-op then
        state.driver.abort(request_id)


@dataclass(frozen=True)
class _Reply:
    chat: bool
    request_id: str
    created: int
    model: str
    work: openai.WorkRequest

    def envelope(self, stream: bool) -> dict[str, Any]:
        return openai.envelope(self.chat, stream, self.request_id, self.created, self.model)


ENGINE_FAILED = "The engine failed while serving this request."


def _engine_failed() -> web.Response:
    body = openai.error_body(ENGINE_FAILED, "InternalServerError", 500)
    return web.Response(body=body, status=500, content_type="application/json")


async def _collect(events: asyncio.Queue[RequestEvent], reply: _Reply) -> web.Response:
    records: dict[int, RequestRecord] = {}
    while len(records) < reply.work.n:
        event = await events.get()
        if event.kind != "finished":
            continue
        if event.record is None:
            return _engine_failed()
        records[event.index] = event.record
    payload = reply.envelope(stream=False)
    payload["choices"] = [
        openai.choice(reply.chat, i, r.output_tokens, r.finish_reason)
        for i, r in sorted(records.items())
    ]
    completion = sum(r.output_tokens for r in records.values())
    payload["usage"] = openai.usage(reply.work.prompt_tokens, completion)
    return _json(payload)


async def _next_batch(events: asyncio.Queue[RequestEvent]) -> list[RequestEvent]:
    """The next event and all that are already queued behind it.

    A step's last token and the request's finish arrive together, and vLLM sends them as one
    chunk; taking everything available keeps them together.
    """
    batch = [await events.get()]
    while not events.empty():
        batch.append(events.get_nowait())
    return batch


def _fold(batch: list[RequestEvent], pending: dict[int, int]) -> dict[int, str] | None:
    """Add new tokens to `pending`; returns finish reasons by choice, None if the engine died."""
    done: dict[int, str] = {}
    for event in batch:
        if event.kind == "finished" and event.record is None:
            return None
        pending[event.index] += event.new_tokens
        if event.record is not None:
            done[event.index] = event.record.finish_reason
    return done


async def _stream(
    request: web.Request,
    events: asyncio.Queue[RequestEvent],
    reply: _Reply,
    interval: int,
) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
    await resp.prepare(request)
    try:
        await _stream_events(resp, events, reply, interval)
        await resp.write(openai.sse("[DONE]"))
        await resp.write_eof()
    except ConnectionResetError:
        pass  # the client left mid-stream: its 200 is on the wire already; the caller aborts
    return resp


async def _stream_events(
    resp: web.StreamResponse,
    events: asyncio.Queue[RequestEvent],
    reply: _Reply,
    interval: int,
) -> None:
    n = reply.work.n

    async def send(index: int, tokens: int, finish: str | None, first: bool = False) -> None:
        chunk = reply.envelope(stream=True)
        chunk["choices"] = [openai.chunk_choice(reply.chat, index, tokens, finish, first=first)]
        await resp.write(openai.sse(chunk))

    if reply.chat:  # vLLM opens a chat stream with the assistant role before any token
        for index in range(n):
            await send(index, 0, None, first=True)
    pending = dict.fromkeys(range(n), 0)
    sent = finished = 0
    while finished < n:
        done = _fold(await _next_batch(events), pending)
        if done is None:
            await resp.write(openai.sse({"error": {"message": ENGINE_FAILED, "code": 500}}))
            break
        for index in sorted(pending):
            # --stream-interval: tokens are held back until that many are ready, or the end
            if pending[index] >= interval or index in done:
                await send(index, pending[index], done.get(index))
                sent += pending[index]
                pending[index] = 0
        finished += len(done)
    else:
        if reply.work.include_usage:
            chunk = reply.envelope(stream=True)
            chunk["choices"] = []
            chunk["usage"] = openai.usage(reply.work.prompt_tokens, sent)
            await resp.write(openai.sse(chunk))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/health", health)
    app.router.add_route("GET", "/ping", health)
    app.router.add_route("POST", "/ping", health)
    app.router.add_get("/version", version)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)


def unix_now() -> int:
    return int(time.time())
