"""A loopback load balancer for one VLLMService: least-outstanding over its ready twins, ties
taken in turn (as nginx's least_conn does: round-robin among the least loaded).

It plays the Service's part (kwok has no kube-proxy). A 503 from a twin is passed through
unchanged, as a real L4/L7 balancer would, so clients see vLLM's own overload answer. Terminating
backends are used only while no ready one is left, as kube-proxy does with terminating endpoints
that still serve (KEP-1669).
"""

from __future__ import annotations

from aiohttp import ClientSession, ClientTimeout, web

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}


class Balancer:
    def __init__(self, key: str) -> None:
        self.key = key
        self.backends: dict[str, str] = {}  # pod name -> base URL
        self.terminating: dict[str, str] = {}  # pod name -> base URL, the fallback
        self.outstanding: dict[str, int] = {}
        self._turn = 0  # which of the least-loaded backends the next tie goes to
        self.runner: web.AppRunner | None = None
        self.url = ""
        self._session: ClientSession | None = None

    def set_backends(
        self, backends: dict[str, str], terminating: dict[str, str] | None = None
    ) -> None:
        self.backends = dict(backends)
        self.terminating = dict(terminating or {})
        every = {**self.terminating, **self.backends}
        # a pod's count lives while it holds requests: one that leaves the backends before it
        # joins the terminating ones (the harness does it in two steps) keeps its count
        self.outstanding = {p: n for p, n in self.outstanding.items() if n > 0 or p in every} | {
            p: 0 for p in every if p not in self.outstanding
        }

    def _pick(self) -> str | None:
        pool = self.backends or self.terminating
        if not pool:
            return None
        # Ties rotate: always the first by name would send an idle fleet's every request to one
        # pod, and a canary would get traffic only when it had strictly fewer requests than the
        # stable pod, never its share (which side won depended on the ReplicaSets' hashes).
        least = min(self.outstanding.get(p, 0) for p in pool)
        ties = sorted(p for p in pool if self.outstanding.get(p, 0) == least)
        self._turn += 1
        return ties[self._turn % len(ties)]

    async def start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        self._session = ClientSession(timeout=ClientTimeout(total=None, sock_connect=5))
        return self.url

    async def stop(self) -> None:
        if self._session:
            await self._session.close()
        if self.runner:
            await self.runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        pod = self._pick()
        # the URL now: the harness may replace the backends while this request is read
        base = self.backends.get(pod or "") or self.terminating.get(pod or "")
        if pod is None or base is None or self._session is None:
            return web.json_response(
                {"error": {"message": f"no ready backend for {self.key}", "code": 503}},
                status=503,
            )
        self.outstanding[pod] = self.outstanding.get(pod, 0) + 1
        try:
            body = await request.read()
            headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP | {"host"}}
            async with self._session.request(
                request.method,
                base + request.rel_url.path_qs,
                data=body,
                headers=headers,
            ) as upstream:
                resp = web.StreamResponse(status=upstream.status)
                for k, v in upstream.headers.items():
                    if k.lower() not in _HOP:
                        resp.headers[k] = v
                await resp.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await resp.write(chunk)
                await resp.write_eof()
                return resp
        except (TimeoutError, OSError) as exc:
            return web.json_response(
                {"error": {"message": f"backend {pod} failed: {exc}", "code": 502}}, status=502
            )
        finally:
            left = self.outstanding.get(pod, 1) - 1
            if left > 0 or pod in self.backends or pod in self.terminating:
                self.outstanding[pod] = left
            else:  # a pod that is gone is forgotten with its last request
                self.outstanding.pop(pod, None)
