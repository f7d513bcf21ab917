"""Token-length distributions a plan takes: the `--prompt-len`/`--output-len` syntax, and the
empirical one a vLLM histogram gives (`vllm:request_prompt_tokens`, `..._generation_tokens`).

Syntax: `N` or `fixed:N`; `exp:MEAN` (or `exponential:MEAN`); `lognormal:MEAN,SIGMA`;
`uniform:LOW,HIGH`. The parametric ones are the engine model's own `LengthDist`.
"""

from __future__ import annotations

import bisect
import functools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from vllm_operator.sim.workload import LengthDist

MAX_TOKENS = 1e7  # more than any model's context: no length (a flag's, a histogram edge) is longer
MAX_SIGMA = 10.0
_AT_LOW = 1e6  # a skew that puts every length at its bucket's lower bound
SYNTAX = "N, fixed:N, exp:MEAN, lognormal:MEAN,SIGMA or uniform:LOW,HIGH"
_KINDS = {
    "fixed": "fixed",
    "exp": "exponential",
    "exponential": "exponential",
    "lognormal": "lognormal",
    "uniform": "uniform",
}
_ARITY = {"fixed": 1, "exponential": 1, "lognormal": 2, "uniform": 2}


class LengthSyntaxError(ValueError):
    """Not a distribution this module reads; the message says what is."""


@dataclass(frozen=True)
class Empirical:
    """Lengths drawn from histogram buckets: a bucket by its share, then a place inside it.

    `edges` are the buckets' upper bounds (vLLM's `le`, +Inf dropped), `cumulative` the share of
    observations at or below each; the first bucket starts at 1. `exact_mean` is the
    histogram's own mean (`_sum` / `_count`), when known.

    Without it a length is uniform inside its bucket, whose mean is the bucket's middle: for
    lengths that sit at one end of their buckets (a benchmark's fixed 200-token prompts are all
    in (100, 200]) that is far off (150 against 200), and so is every capacity sized with it.
    With it, the place inside every bucket is drawn as `low + (edge - low) * v**skew`, v uniform,
    with the one skew whose mean is the exact mean: every length stays in its own bucket (the
    histogram still holds) and the mean is the measured one, clamped to what the buckets allow
    (all at their lower bounds, or all at their upper ones).
    """

    edges: tuple[float, ...]
    cumulative: tuple[float, ...]
    exact_mean: float | None = None

    def __post_init__(self) -> None:
        if not self.edges or len(self.edges) != len(self.cumulative):
            raise ValueError("an empirical distribution needs one share per bucket edge")
        if self.cumulative[-1] <= 0 or any(
            b < a for a, b in zip(self.cumulative, self.cumulative[1:], strict=False)
        ):
            raise ValueError("bucket shares must be cumulative and not all zero")
        if self.exact_mean is not None and not (
            math.isfinite(self.exact_mean) and self.exact_mean > 0
        ):
            raise ValueError("an exact mean must be a positive number")

    def _buckets(self) -> list[tuple[float, float, float]]:
        """(share, lower bound, width) of each bucket."""
        out, low, prev = [], 1.0, 0.0
        for edge, cum in zip(self.edges, self.cumulative, strict=True):
            out.append(((cum - prev) / self.cumulative[-1], low, max(0.0, edge - low)))
            low, prev = edge, cum
        return out

    @functools.cached_property
    def skew(self) -> float:
        """The exponent of the place inside a bucket: 1 = uniform, 0 = at the upper bound."""
        if self.exact_mean is None:
            return 1.0
        buckets = self._buckets()
        lowest = sum(share * low for share, low, _ in buckets)
        spread = sum(share * width for share, _, width in buckets)
        if spread <= 0 or self.exact_mean >= lowest + spread:
            return 0.0
        # the mean is lowest + spread / (skew + 1); at or under `lowest`, every length sits
        # at its lower bound, which a skew this large gives to within rounding
        return spread / (self.exact_mean - lowest) - 1 if self.exact_mean > lowest else _AT_LOW

    @property
    def mean(self) -> float:
        return sum(share * (low + width / (self.skew + 1)) for share, low, width in self._buckets())

    @property
    def second_moment(self) -> float:
        """E[x^2] of the lengths `sample` draws."""
        a = self.skew
        return sum(
            share * (low * low + 2 * low * width / (a + 1) + width * width / (2 * a + 1))
            for share, low, width in self._buckets()
        )

    def sample(self, rng: random.Random) -> int:
        u = rng.random() * self.cumulative[-1]
        i = bisect.bisect_left(self.cumulative, u)
        i = min(i, len(self.edges) - 1)
        low = self.edges[i - 1] if i else 1.0
        place: float = rng.random() ** self.skew  # skew 1: the uniform draw it always was
        return max(1, round(low + (self.edges[i] - low) * place))


Lengths = LengthDist | Empirical


def empirical_from_buckets(
    buckets: Sequence[tuple[float, float]], total: float | None = None
) -> Empirical:
    """(le, cumulative count) pairs of a Prometheus histogram -> Empirical; ValueError if empty.

    The +Inf bucket's extra observations (above the last finite edge) count at that edge.
    `total`: the histogram's `_sum` over the same window, for its exact mean (None: unknown).
    """
    finite = sorted((le, count) for le, count in buckets if math.isfinite(le))
    count = max((count for _, count in buckets), default=0.0)
    if not finite or count <= 0:
        raise ValueError("the histogram holds no observations in the window")
    edges = tuple(le for le, _ in finite)
    cumulative = [c for _, c in finite]
    cumulative[-1] = count
    # rates from Prometheus can dip by float noise: keep them cumulative
    for k in range(1, len(cumulative)):
        cumulative[k] = max(cumulative[k], cumulative[k - 1])
    exact = total / count if total is not None and math.isfinite(total) and total > 0 else None
    return Empirical(edges, tuple(c / count for c in cumulative), exact)


def parse_lengths(text: str) -> LengthDist:
    """`exp:512` -> LengthDist("exponential", 512); LengthSyntaxError names the syntax."""
    kind, _, rest = text.strip().partition(":")
    if not rest:
        kind, rest = "fixed", kind
    name = _KINDS.get(kind.lower())
    parts = rest.split(",")
    if name is None or len(parts) != _ARITY[name]:
        raise LengthSyntaxError(f"{text!r} is not a length distribution: use {SYNTAX}")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise LengthSyntaxError(f"{text!r}: the parameters must be numbers ({SYNTAX})") from None
    if not all(math.isfinite(v) and v > 0 for v in values):
        raise LengthSyntaxError(f"{text!r}: the parameters must be positive")
    # beyond these, sampling overflows a float (lognormal) or asks for more tokens than any
    # model holds
    if name == "lognormal" and values[1] > MAX_SIGMA:
        raise LengthSyntaxError(f"{text!r}: SIGMA must be at most {MAX_SIGMA:g}")
    if max(values if name != "lognormal" else values[:1]) > MAX_TOKENS:
        raise LengthSyntaxError(f"{text!r}: lengths must be at most {MAX_TOKENS:,.0f} tokens")
    if name == "uniform" and values[1] < values[0]:
        raise LengthSyntaxError(f"{text!r}: uniform needs LOW <= HIGH")
    return LengthDist(name, values[0], values[1] if len(values) > 1 else 1.0)
