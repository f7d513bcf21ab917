"""aiohttp's own HTTP errors (no route, a method the route lacks) as vLLM answers them.

vLLM's FastAPI app turns every HTTPException into its JSON error body, `{"error": {"message":
the status phrase, "type": the phrase, "param": null, "code": the status}}` (vLLM's HTTP
exception handler in vllm/entrypoints; the 400s of validation are the twin's openai.RequestError).
aiohttp answers them in plain text; a client that parses the body as vLLM's would fail on it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from http import HTTPStatus

from aiohttp import web

from vllm_twin.server.openai import error_body

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# A prompt is at most max_model_len words and vLLM (uvicorn) sets no body limit; aiohttp's
# default of 1 MiB refused prompts that fit the context. Bounded still, so a body cannot take
# the twin's memory.
MAX_BODY_BYTES = 256 << 20


@web.middleware
async def json_http_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        phrase = HTTPStatus(exc.status).phrase
        # 404 and 405 carry only the phrase in vLLM; aiohttp's text says more for the others
        message = phrase if exc.status in (404, 405) else (exc.text or phrase).strip()
        headers = {k: v for k, v in exc.headers.items() if k.lower() == "allow"}
        return web.Response(
            body=error_body(message, phrase, exc.status),
            status=exc.status,
            content_type="application/json",
            headers=headers,
        )
