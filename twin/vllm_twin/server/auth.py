"""vLLM's API key check: with `--api-key` or VLLM_API_KEY set, paths under /v1, /v2, /inference
and /cohere need `Authorization: Bearer KEY`; anything else (/health, /metrics) stays open
(vllm/entrypoints/serve/middleware/authenticate.py, docs/vllm-0.33.md §4.4)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, Mapping, Sequence

from aiohttp import web
from aiohttp.typedefs import Middleware

from vllm_operator.vllm.flags import API_KEY_ENV

GUARDED_PREFIXES = ("/v1", "/v2", "/inference", "/cohere")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def resolve_api_keys(flag_values: Sequence[str] | None, env: Mapping[str, str]) -> tuple[str, ...]:
    """vLLM's rule: the --api-key values win over VLLM_API_KEY; empty keys do not count."""
    keys = list(flag_values) if flag_values else [env.get(API_KEY_ENV, "")]
    return tuple(k for k in keys if k)


def _authorized(header: str | None, keys: tuple[str, ...]) -> bool:
    if not header:
        return False
    scheme, _, token = header.partition(" ")
    # as vLLM does: digests of equal length, every key compared, so the time taken says neither
    # the key's length nor which key is close
    digest = hashlib.sha256(token.encode()).digest()
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(digest, hashlib.sha256(key.encode()).digest())
    return scheme.lower() == "bearer" and matched


def build_auth_middleware(keys: tuple[str, ...]) -> Middleware:
    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        guarded = request.method != "OPTIONS" and request.path.startswith(GUARDED_PREFIXES)
        if guarded and not _authorized(request.headers.get("Authorization"), keys):
            return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    return authenticate
