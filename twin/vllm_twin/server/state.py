"""The twin server's shared state: its options, the engine driver, the metrics registry."""

from __future__ import annotations

import time
from dataclasses import dataclass

from aiohttp import web

from vllm_twin.exposition import Registry
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


def unix_now() -> int:
    return int(time.time())
