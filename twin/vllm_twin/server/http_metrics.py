"""HTTP metrics as vLLM exposes them via prometheus-fastapi-instrumentator (docs/vllm-0.33.md §3.4).

- `handler` is the route template (`/v1/completions`); requests that match no route are `none`;
- `status` is grouped (`2xx`, `4xx`, `5xx`), so a 503 reads as `5xx`;
- the probe and scrape routes are not instrumented at all;
- durations cover the whole response, streaming included, and are in the twin's virtual
  seconds so that they agree with the engine histograms under `--time-scale`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from vllm_twin.exposition import Registry
from vllm_twin.server import buckets

EXCLUDED_HANDLERS = frozenset({"/metrics", "/health", "/load", "/ping", "/version", "/server_info"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def route_template(request: web.Request) -> str:
    """The matched route's template, or `none` when no route matched (404, 405)."""
    info = request.match_info
    if info.http_exception is not None:
        return "none"
    return info.route.resource.canonical if info.route.resource is not None else "none"


class HttpMetrics:
    def __init__(self, registry: Registry, elapsed: Callable[[], float]) -> None:
        """`elapsed` reads the virtual clock, in seconds."""
        self._elapsed = elapsed
        self.requests = registry.counter(
            "http_requests",
            "Total number of requests by method, status and handler.",
            ("method", "status", "handler"),
        )
        self.request_size = registry.summary(
            "http_request_size_bytes",
            "Content length of incoming requests by handler. Only value of header is respected. "
            "Otherwise ignored. No percentile calculated. ",
            ("handler",),
        )
        self.response_size = registry.summary(
            "http_response_size_bytes",
            "Content length of outgoing responses by handler. Only value of header is respected. "
            "Otherwise ignored. No percentile calculated. ",
            ("handler",),
        )
        self.duration_highr = registry.histogram(
            "http_request_duration_highr_seconds",
            "Latency with many buckets but no API specific labels. Made for more accurate "
            "percentile calculations. ",
            (),
            buckets.HTTP_DURATION_HIGHR,
        )
        self.duration = registry.histogram(
            "http_request_duration_seconds",
            "Latency with only few buckets by handler. Made to be only used if aggregation by "
            "handler is important. ",
            ("method", "handler"),
            buckets.HTTP_DURATION,
        )

    def record(
        self,
        method: str,
        handler: str,
        status: int,
        duration: float,
        request_bytes: int,
        response_bytes: int,
    ) -> None:
        if handler in EXCLUDED_HANDLERS:
            return
        self.requests.inc(1, method, f"{status // 100}xx", handler)
        self.request_size.observe(request_bytes, handler)
        self.response_size.observe(response_bytes, handler)
        self.duration_highr.observe(duration)
        self.duration.observe(duration, method, handler)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        start = self._elapsed()

        def done(status: int, response_bytes: int) -> None:
            self.record(
                request.method,
                route_template(request),
                status,
                self._elapsed() - start,
                request.content_length or 0,
                response_bytes,
            )

        # a cancelled handler (client gone before an answer) is not recorded: there is no status
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            done(exc.status, len(exc.body) if isinstance(exc.body, bytes) else 0)
            raise
        except Exception:
            done(500, 0)
            raise
        done(response.status, _body_length(response))
        return response


def _body_length(response: web.StreamResponse) -> int:
    if isinstance(response, web.Response):
        return response.content_length or 0
    # a streamed answer: count what was written (aiohttp tracks it once prepared)
    return response.body_length
