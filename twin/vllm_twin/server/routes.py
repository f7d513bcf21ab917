"""HTTP handlers of the twin: the probes, /version, /v1/models and /metrics, and the routes."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from vllm_twin.exposition import CONTENT_TYPE
from vllm_twin.server.generate import chat_completions, completions, json_response
from vllm_twin.server.state import STATE, VLLM_VERSION


async def health(request: web.Request) -> web.Response:
    # like vLLM: 200 with an empty body while the engine lives; overload does not show here
    failed = request.app[STATE].driver.failure is not None
    return web.Response(status=503 if failed else 200)


async def version(request: web.Request) -> web.Response:
    return json_response({"version": VLLM_VERSION})


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
    return json_response({"object": "list", "data": data})


async def metrics(request: web.Request) -> web.Response:
    state = request.app[STATE]
    state.driver.sync()  # gauges as of now, not of the last engine wake-up
    return web.Response(
        body=state.registry.render().encode(), headers={"Content-Type": CONTENT_TYPE}
    )


def add_routes(app: web.Application) -> None:
    app.router.add_get("/health", health)
    app.router.add_route("GET", "/ping", health)
    app.router.add_route("POST", "/ping", health)
    app.router.add_get("/version", version)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
