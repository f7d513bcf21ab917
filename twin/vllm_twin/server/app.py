"""Assembles the twin's aiohttp application and serves it on a loopback address."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from vllm_operator.sim.engine import Engine
from vllm_twin.exposition import Registry
from vllm_twin.server.auth import build_auth_middleware
from vllm_twin.server.driver import EngineDriver, NullObserver, Observer
from vllm_twin.server.errors import MAX_BODY_BYTES, json_http_errors
from vllm_twin.server.http_metrics import HttpMetrics
from vllm_twin.server.routes import add_routes
from vllm_twin.server.state import STATE, ServeOptions, TwinState, unix_now
from vllm_twin.server.vllm_metrics import VllmMetrics, cache_config_labels

log = logging.getLogger(__name__)


def build_app(
    engine: Engine,
    options: ServeOptions,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> web.Application:
    """The twin's app around a ready engine; the driver task runs while the app is started."""
    registry = Registry()
    max_model_len = engine.resolved.max_model_len
    observer: Observer = NullObserver()
    if not options.disable_log_stats:
        # --disable-log-stats drops every vllm:* family; HTTP metrics stay (docs/vllm-0.33.md §3.1)
        observer = VllmMetrics(
            registry,
            options.served_model_names[0],
            max_model_len,
            cache_config_labels(engine.resolved),
        )
    driver = EngineDriver(engine, observer, clock=clock, time_scale=options.time_scale)
    http = HttpMetrics(registry, elapsed=driver.now)
    # inside the HTTP metrics, so that a 401 or a 404 is counted like any answer
    middlewares: list[Middleware] = [http.middleware, json_http_errors]
    if options.api_keys:
        middlewares.append(build_auth_middleware(options.api_keys))
    app = web.Application(middlewares=middlewares, client_max_size=MAX_BODY_BYTES)
    app[STATE] = TwinState(driver, options, registry, max_model_len, unix_now())
    add_routes(app)
    app.cleanup_ctx.append(_run_driver)
    return app


async def _run_driver(app: web.Application) -> AsyncIterator[None]:
    driver = app[STATE].driver
    task = asyncio.create_task(driver.run(), name="twin-engine-driver")
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        try:
            await task
        except Exception:  # already reported through /health; say it once more on the way out
            log.exception("the engine driver had failed")


async def start_server(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Listen on host:port (0 = any free port); returns the runner and the port bound."""
    # handler_cancellation: a client that disconnects cancels its handler, which aborts the
    # request in the engine, as vLLM does on disconnect
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1]
    return runner, int(bound)
