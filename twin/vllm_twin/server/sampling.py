"""vLLM 0.33's sampling-parameter checks, for the fields the twin's request model types.

vLLM's request model accepts `"temperature": 3` or `"presence_penalty": 9`; the serving layer
then builds `SamplingParams` from the request (`to_sampling_params`, with the engine's clamped
max_tokens) and that refuses them: a 400 after admission and the context checks, before any
prompt reaches the engine (vllm/sampling_params.py: `from_optional`, `_verify_args`,
`_verify_greedy_sampling`). The checks run here in vLLM's order, with its messages. Its
`VLLMValidationError` appends what it names (`(parameter=max_tokens, value=0)`) to the message
the client reads, and so does `validation_message`.

Not reproduced: what reads fields the twin does not type (bad_words, allowed_token_ids,
structured outputs, extra_args, thinking budgets) and a model's generation_config defaults (the
twin knows no model's; vLLM's own defaults stand in). The parity tier compares each verdict with
vLLM's `to_sampling_params` (tests/parity/test_vllm_requests.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from vllm_operator.sim.engine import MAX_N_SEQUENCES
from vllm_twin.server.request_unserved import constraint_problem

SAMPLING_EPS: Final = 1e-5  # below it, temperature means greedy sampling
MAX_TEMP: Final = 1e-2  # a temperature in (0, MAX_TEMP) is raised to it, not refused


class SamplingError(ValueError):
    """What SamplingParams refuses: vLLM's message (as the client reads it) and its param."""

    def __init__(self, message: str, param: str | None = None, value: Any = None) -> None:
        self.message = validation_message(message, param, value)
        self.param = param
        super().__init__(self.message)


def validation_message(message: str, param: str | None = None, value: Any = None) -> str:
    """The text of vLLM's VLLMValidationError (vllm/exceptions.py `__str__`), which its error
    response carries as the message."""
    extras = [f"parameter={param}"] if param is not None else []
    if value is not None:
        extras.append(f"value={value}")
    return f"{message} ({', '.join(extras)})" if extras else message


@dataclass(frozen=True)
class Sampling:
    """The request's sampling fields, defaulted as `to_sampling_params` defaults them."""

    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    min_tokens: int = 0
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    stop: tuple[str, ...] = ()
    logit_bias: tuple[tuple[str, float], ...] = ()
    constraint_error: str | None = None  # request_unserved.constraint_problem's


def sampling_of(typed: Any, *, chat: bool) -> Sampling:
    """`typed`, a request body as request_model.py types it, as SamplingParams would get it."""
    defaults = Sampling()

    def pick(name: str) -> Any:
        value = getattr(typed, name, None)
        return getattr(defaults, name) if value is None else value

    prompt_logprobs = typed.prompt_logprobs
    if chat:
        logprobs = typed.top_logprobs if typed.logprobs else None
    else:
        logprobs = typed.logprobs
        if prompt_logprobs is None and typed.echo:
            prompt_logprobs = typed.logprobs
    stop = typed.stop
    bias: Mapping[str, float] = typed.logit_bias or {}
    return Sampling(
        n=1 if typed.n is None else typed.n,
        presence_penalty=pick("presence_penalty"),
        frequency_penalty=pick("frequency_penalty"),
        repetition_penalty=pick("repetition_penalty"),
        temperature=pick("temperature"),
        top_p=pick("top_p"),
        top_k=pick("top_k"),
        min_p=pick("min_p"),
        min_tokens=typed.min_tokens,
        logprobs=logprobs,
        prompt_logprobs=prompt_logprobs,
        stop=(stop,) if isinstance(stop, str) else tuple(stop or ()),
        logit_bias=tuple(bias.items()),
        constraint_error=constraint_problem(typed),
    )


def check_sampling(s: Sampling, max_tokens: int) -> None:
    """Raise SamplingError where vLLM's SamplingParams refuses `s` with `max_tokens` (the
    engine's, after the clamp to the context)."""
    if s.constraint_error is not None:  # to_sampling_params merges them before SamplingParams
        raise SamplingError(s.constraint_error)
    _check_logit_bias(s.logit_bias)
    _check_n(s.n)
    _check_penalties(s)
    _check_temperature(s.temperature)
    if not 0.0 < s.top_p <= 1.0:
        raise SamplingError(f"top_p must be in (0, 1], got {s.top_p}.", "top_p", s.top_p)
    if s.top_k < -1:
        raise SamplingError(f"top_k must be 0 (disable), or at least 1, got {s.top_k}.")
    if not 0.0 <= s.min_p <= 1.0:
        raise SamplingError(f"min_p must be in [0, 1], got {s.min_p}.")
    _check_lengths(s, max_tokens)
    for name, value in (("logprobs", s.logprobs), ("prompt_logprobs", s.prompt_logprobs)):
        if value is not None and value != -1 and value < 0:
            raise SamplingError(f"{name} must be non-negative or -1, got {value}.", name, value)
    if any(not stop for stop in s.stop):
        raise SamplingError("stop cannot contain an empty string.")
    if _temperature(s.temperature) < SAMPLING_EPS and s.n > 1:
        raise SamplingError(f"n must be 1 when using greedy sampling, got {s.n}.")


def _check_penalties(s: Sampling) -> None:
    for name, value in (
        ("presence_penalty", s.presence_penalty),
        ("frequency_penalty", s.frequency_penalty),
    ):
        if not -2.0 <= value <= 2.0:
            raise SamplingError(f"{name} must be in [-2, 2], got {value}.")
    if not math.isfinite(s.repetition_penalty):
        raise SamplingError(
            f"repetition_penalty must be a finite number, got {s.repetition_penalty}."
        )
    if s.repetition_penalty <= 0.0:
        raise SamplingError(
            f"repetition_penalty must be greater than zero, got {s.repetition_penalty}."
        )


def _check_lengths(s: Sampling, max_tokens: int) -> None:
    if max_tokens < 1:
        raise SamplingError(
            f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens", max_tokens
        )
    if s.min_tokens < 0:
        raise SamplingError(f"min_tokens must be greater than or equal to 0, got {s.min_tokens}.")
    if s.min_tokens > max_tokens:
        raise SamplingError(
            f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {s.min_tokens}."
        )


def _check_logit_bias(bias: tuple[tuple[str, float], ...]) -> None:
    invalid = []
    for token, _ in bias:
        try:
            int(token)
        except (ValueError, TypeError):
            invalid.append(token)
    if invalid:
        raise SamplingError(
            "logit_bias contains key(s) that cannot be converted to integer token IDs: "
            f"{invalid!r}",
            "logit_bias",
            invalid,
        )


def _check_n(n: int) -> None:
    if n < 1:
        raise SamplingError(f"n must be at least 1, got {n}.")
    if n > MAX_N_SEQUENCES:
        raise SamplingError(
            f"n must be at most {MAX_N_SEQUENCES}, got {n}. To increase this limit, set the "
            "VLLM_MAX_N_SEQUENCES environment variable."
        )


def _temperature(t: float) -> float:
    return MAX_TEMP if 0 < t < MAX_TEMP else t  # SamplingParams.__post_init__ raises it


def _check_temperature(given: float) -> None:
    t = _temperature(given)
    if not math.isfinite(t):
        raise SamplingError(f"temperature must be a finite number, got {t}.", "temperature", t)
    if t < 0.0:
        raise SamplingError(f"temperature must be non-negative, got {t}.", "temperature", t)
    if t > 2.0:
        raise SamplingError(f"temperature must be in [0, 2], got {t}.", "temperature", t)
