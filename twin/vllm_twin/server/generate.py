"""The generation routes, /v1/completions and /v1/chat/completions, in vLLM 0.33's order.

A request is checked by vLLM's request model (400) and model name (404), admitted (503, the
serving layer's `_preflight`), its prompts checked against the context (400, openai.py
`engine_prompts`), and then each prompt goes to the engine, which admits it again (503). A
completions batch of several prompts is several engine requests, named `<id>-<i>` as vLLM
names them; their choices are numbered prompt by prompt, n each, and usage sums their tokens.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, replace
from typing import Any

from aiohttp import web

from vllm_operator.sim.engine import (
    InvalidRequestError,
    Rejected,
    RequestEvent,
    RequestRecord,
    SimRequest,
)
from vllm_twin.server import openai
from vllm_twin.server.driver import EngineDriver
from vllm_twin.server.state import STATE, TwinState, unix_now


def json_response(payload: Any, status: int = 200) -> web.Response:
    body = json.dumps(payload, separators=(",", ":")).encode()
    return web.Response(body=body, status=status, content_type="application/json")


def _error(exc: openai.RequestError) -> web.Response:
    return web.Response(body=exc.body(), status=exc.status, content_type="application/json")


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
    work = openai.parse_work(body, chat=chat)
    if work.model is not None and work.model not in state.options.served_model_names:
        raise openai.RequestError(
            f"The model `{work.model}` does not exist.", status=404, param="model"
        )
    return work


def answer_id(chat: bool, header: str | None, body: str | None) -> str:
    """The answer's id as vLLM names it (`_base_request_id`, vllm/entrypoints/serve/engine/
    serving.py): the X-Request-Id header, else the body's request_id, else a random one."""
    base = header if header is not None else body if body is not None else uuid.uuid4().hex
    return f"{'chatcmpl' if chat else 'cmpl'}-{base}"


async def _generate(request: web.Request, chat: bool) -> web.StreamResponse:
    """vLLM 0.33's order: the request model (400), the model name (404), admission (503), the
    prompts' checks (400), then each prompt to the engine, admitted again (503)."""
    state = request.app[STATE]
    arrival = state.driver.now()  # vLLM stamps arrival before rendering and tokenization
    try:
        work = await _read_work(request, chat, state)
        rejected = state.driver.preflight(work.n)
        if rejected is not None:
            return _overloaded(rejected)
        prompts = openai.engine_prompts(work, state.max_model_len)
    except openai.RequestError as exc:
        return _error(exc)
    # usage counts the prompts as the engine got them: truncate_prompt_tokens may cut them
    work = replace(work, prompts=tuple(p.prompt_tokens for p in prompts))
    request_id = answer_id(chat, request.headers.get("X-Request-Id"), work.request_id)
    # vLLM names a completion's engine requests by prompt; a chat has one, the request's own.
    # A client's id need not be unique, so the engine's carry a suffix of the twin's.
    engine_id = f"{request_id}-{uuid.uuid4().hex[:8]}"
    ids = [engine_id] if chat else [f"{engine_id}-{i}" for i in range(len(prompts))]
    events: asyncio.Queue[RequestEvent] = asyncio.Queue()
    try:
        refused = _submit_all(state.driver, events, ids, prompts, work, chat, arrival)
        if refused is not None:
            # a batch prompt refused after others went in: vLLM's stream has started by then
            if work.stream and refused.after_first:
                return await _stream_error(request, refused.error)
            return _error(refused.error)
        # answers name the model the client asked for (any served name), else the first one
        model = work.model or state.options.served_model_names[0]
        reply = _Reply(chat, request_id, unix_now(), model, work, len(prompts) * work.n)
        if work.stream:
            return await _stream(request, events, reply, state.options.stream_interval)
        return await _collect(events, reply)
    finally:
        # the client went away (cancelled handler, reset stream) or we are done: a no-op then
        for engine_id in ids:
            state.driver.abort(engine_id)


def _overloaded(rejected: Rejected) -> web.Response:
    # exactly vLLM's body; no Retry-After header, as in vLLM
    return _error(openai.RequestError(rejected.message, status=503))


@dataclass(frozen=True)
class _Refused:
    error: openai.RequestError
    after_first: bool  # prompts of the batch were in the engine already


def _submit_all(
    driver: EngineDriver,
    events: asyncio.Queue[RequestEvent],
    ids: list[str],
    prompts: tuple[openai.EnginePrompt, ...],
    work: openai.WorkRequest,
    chat: bool,
    arrival: float,
) -> _Refused | None:
    """Each prompt to the engine, its events on `events`; the first refusal, if any (the
    caller aborts what went in)."""
    for i, (engine_id, prompt) in enumerate(zip(ids, prompts, strict=True)):
        sim = SimRequest(
            request_id=engine_id,
            arrival=arrival,
            prompt_tokens=prompt.prompt_tokens,
            max_tokens=prompt.max_tokens,
            priority=work.priority,
            n=work.n,
            chat=chat,
        )
        try:
            outcome = driver.submit(sim, events, first_index=i * work.n)
        except InvalidRequestError as exc:
            return _Refused(openai.RequestError.from_engine(exc), i > 0)
        if isinstance(outcome, Rejected):
            return _Refused(openai.RequestError(outcome.message, status=503), i > 0)
    return None


async def _stream_error(request: web.Request, error: openai.RequestError) -> web.StreamResponse:
    """vLLM's completion stream when a generator fails: one error event, then [DONE]."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
    await resp.prepare(request)
    body = {"message": error.message, "type": error.type, "param": error.param}
    # json.dumps' own spacing, as vLLM's create_streaming_error_response writes it
    await resp.write(openai.sse(json.dumps({"error": {**body, "code": error.status}})))
    await resp.write(openai.sse("[DONE]"))
    await resp.write_eof()
    return resp


@dataclass(frozen=True)
class _Reply:
    chat: bool
    request_id: str
    created: int
    model: str
    work: openai.WorkRequest
    choices: int  # n per prompt, for each prompt

    def envelope(self, stream: bool) -> dict[str, Any]:
        return openai.envelope(self.chat, stream, self.request_id, self.created, self.model)


ENGINE_FAILED = "The engine failed while serving this request."


def _engine_failed() -> web.Response:
    body = openai.error_body(ENGINE_FAILED, "InternalServerError", 500)
    return web.Response(body=body, status=500, content_type="application/json")


async def _collect(events: asyncio.Queue[RequestEvent], reply: _Reply) -> web.Response:
    records: dict[int, RequestRecord] = {}
    while len(records) < reply.choices:
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
    return json_response(payload)


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
    n, work = reply.choices, reply.work
    sent = dict.fromkeys(range(n), 0)  # tokens streamed per choice

    async def send(index: int, tokens: int, finish: str | None, first: bool = False) -> None:
        chunk = reply.envelope(stream=True)
        chunk["choices"] = [openai.chunk_choice(reply.chat, index, tokens, finish, first=first)]
        sent[index] += tokens
        if work.continuous_usage:  # each chunk: its prompt's tokens, its choice's so far
            prompt = work.prompts[index // work.n]
            chunk["usage"] = openai.running_usage(reply.chat, prompt, sent[index])
        await resp.write(openai.sse(chunk))

    if reply.chat:  # vLLM opens a chat stream with the assistant role before any token
        for index in range(n):
            await send(index, 0, None, first=True)
    pending = dict.fromkeys(range(n), 0)
    finished = 0
    while finished < n:
        done = _fold(await _next_batch(events), pending)
        if done is None:
            await resp.write(openai.sse({"error": {"message": ENGINE_FAILED, "code": 500}}))
            break
        for index in sorted(pending):
            # --stream-interval: tokens are held back until that many are ready, or the end
            if pending[index] >= interval or index in done:
                await send(index, pending[index], done.get(index))
                pending[index] = 0
        finished += len(done)
    else:
        if work.include_usage:
            chunk = reply.envelope(stream=True)
            chunk["choices"] = []
            chunk["usage"] = openai.usage(work.prompt_tokens, sum(sent.values()))
            await resp.write(openai.sse(chunk))
