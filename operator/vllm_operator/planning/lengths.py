"""Token-length distributions a plan takes: the `--prompt-len`/`--output-len` syntax, and the
empirical one a vLLM histogram gives (`vllm:request_prompt_tokens`, `..._generation_tokens`).

Syntax: `N` or `fixed:N`; `exp:MEAN` (or `exponential:MEAN`); `lognormal:MEAN,SIGMA`;
`uniform:LOW,HIGH`. The parametric ones are the engine model's own `LengthDist`.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from vllm_operator.sim.workload import LengthDist

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
    """Lengths drawn from histogram buckets: a bucket by its share, then uniform inside it.

    `edges` are the buckets' upper bounds (vLLM's `le`, +Inf dropped), `cumulative` the share of
    observations at or below each; the first bucket starts at 1.
    """

    edges: tuple[float, ...]
    cumulative: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.edges or len(self.edges) != len(self.cumulative):
            raise ValueError("an empirical distribution needs one share per bucket edge")
        if self.cumulative[-1] <= 0 or any(
            b < a for a, b in zip(self.cumulative, self.cumulative[1:], strict=False)
        ):
            raise ValueError("bucket shares must be cumulative and not all zero")

    @property
    def mean(self) -> float:
        total, low, prev = 0.0, 1.0, 0.0
        for edge, cum in zip(self.edges, self.cumulative, strict=True):
            total += (cum - prev) * (low + edge) / 2
            low, prev = edge, cum
        return total / self.cumulative[-1]

    def sample(self, rng: random.Random) -> int:
        u = rng.random() * self.cumulative[-1]
        i = bisect.bisect_left(self.cumulative, u)
        i = min(i, len(self.edges) - 1)
        low = self.edges[i - 1] if i else 1.0
        return max(1, round(rng.uniform(low, self.edges[i])))


Lengths = LengthDist | Empirical


def empirical_from_buckets(buckets: Sequence[tuple[float, float]]) -> Empirical:
    """(le, cumulative count) pairs of a Prometheus histogram -> Empirical; ValueError if empty.

    The +Inf bucket's extra observations (above the last finite edge) count at that edge.
    """
    finite = sorted((le, count) for le, count in buckets if math.isfinite(le))
    total = max((count for _, count in buckets), default=0.0)
    if not finite or total <= 0:
        raise ValueError("the histogram holds no observations in the window")
    edges = tuple(le for le, _ in finite)
    cumulative = [count for _, count in finite]
    cumulative[-1] = total
    # rates from Prometheus can dip by float noise: keep them cumulative
    for k in range(1, len(cumulative)):
        cumulative[k] = max(cumulative[k], cumulative[k - 1])
    return Empirical(edges, tuple(c / total for c in cumulative))


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
    if name == "uniform" and values[1] < values[0]:
        raise LengthSyntaxError(f"{text!r}: uniform needs LOW <= HIGH")
    return LengthDist(name, values[0], values[1] if len(values) > 1 else 1.0)
