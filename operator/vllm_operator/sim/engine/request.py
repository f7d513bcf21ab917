"""The engine's public value types: requests in, rejections and events out, finished records.

Clocks (docs/vllm-0.33-scheduler.md §6.3): `arrival` is the API server's clock when the HTTP request
came in; `queued`, `scheduled`, `first_token`, `finished` and `token_times` are engine
timestamps (a step's end for outputs, a step's schedule() start for `scheduled`). TTFT and E2E
are client-visible, so they add the API-side output delay (alpha2, and alpha1 for the final
output: docs/twin-calibration.md §2.3) to the engine timestamp.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import sub
from typing import Literal, NamedTuple

RejectReason = Literal["max_num_queued_reqs", "max_num_queued_tokens"]
FinishReason = Literal["length", "stop", "abort"]

# vLLM's 503 bodies (docs/vllm-0.33.md §2.2)
BUSY_MESSAGE = (
    "The engine is currently busy and cannot accept new requests. Please try again later or "
    "on a different instance."
)
BACKLOG_MESSAGE = (
    "The engine has reached its prefill token backlog limit. Please try again later or on a "
    "different instance."
)


@dataclass(frozen=True)
class SimRequest:
    """A completion request; `arrival` is informational, the engine stamps submit()'s `now`."""

    request_id: str
    arrival: float
    prompt_tokens: int
    max_tokens: int
    priority: int = 0
    n: int = 1
    # Shared-prefix modelling for prefix caching: requests with the same prefix_id share their
    # first prefix_tokens prompt tokens. Without it a prompt shares nothing with other requests.
    prefix_id: str | None = None
    prefix_tokens: int = 0
    chat: bool = False  # came in on /v1/chat/completions (costs the API server more)


class Rejected(NamedTuple):
    reason: RejectReason
    message: str  # vLLM's exact 503 body message


# vLLM refuses a request asking for more than VLLM_MAX_N_SEQUENCES completions (default 16384) in
# SamplingParams._verify_args, before admission: a 400, never a queue of that many sequences.
MAX_N_SEQUENCES = 16384


class InvalidRequestError(ValueError):
    """A request vLLM would refuse with HTTP 400 (validation), not 503 (admission)."""


@dataclass(frozen=True)
class RequestRecord:
    request_id: str
    arrival: float  # API clock
    scheduled: float  # first time RUNNING (start of that schedule())
    first_token: float  # engine timestamp of the first output
    finished: float  # engine timestamp of the final output
    prompt_tokens: int
    output_tokens: int
    preemptions: int
    finish_reason: FinishReason
    token_times: tuple[float, ...]  # engine timestamp of each output token
    index: int = 0  # choice index for n > 1
    queued: float = 0.0  # engine-core arrival (QUEUED event): arrival + API overhead
    cached_tokens: int = 0  # prefix-cache hit at the first scheduling
    output_delay: float = 0.0  # API-side delay of each output (alpha2)
    finish_delay: float = 0.0  # extra delay of the final output (alpha1)
    priority: int = 0

    @property
    def queue_time(self) -> float:
        return self.scheduled - self.queued

    @property
    def prefill_time(self) -> float:
        return self.first_token - self.scheduled

    @property
    def decode_time(self) -> float:
        return self.finished - self.first_token

    @property
    def inference_time(self) -> float:
        return self.finished - self.scheduled

    @property
    def ttft(self) -> float:
        return self.first_token + self.output_delay - self.arrival

    @property
    def e2e(self) -> float:
        return self.finished + self.output_delay + self.finish_delay - self.arrival

    @property
    def itls(self) -> tuple[float, ...]:
        """Inter-token latencies as vLLM's histogram samples them (engine clock)."""
        times = self.token_times
        return tuple(map(sub, times[1:], times))

    @property
    def tpot(self) -> float:
        out = self.output_tokens
        return self.decode_time / (out - 1) if out > 1 else 0.0


@dataclass(frozen=True)
class RequestEvent:
    """`tokens`: one output (the first one is the first token); `finished` carries the record."""

    request_id: str
    time: float  # client-visible time of the output
    kind: Literal["tokens", "finished"]
    new_tokens: int
    record: RequestRecord | None
    index: int = 0  # choice index for n > 1
