"""Instant vectors as /api/v1/query returns them (`data.result`), checked and typed (pure)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class ResponseShapeError(ValueError):
    """The answer is not an instant vector: another result type, or malformed samples."""


@dataclass(frozen=True)
class Sample:
    labels: Mapping[str, str]
    value: float  # may be NaN or ±Inf: Prometheus sends "NaN", "+Inf", "-Inf"


def parse_vector(result: Any) -> list[Sample]:
    """`[{"metric": {...}, "value": [ts, "1.5"]}, ...]` -> samples; ResponseShapeError if not."""
    if not isinstance(result, list):
        raise ResponseShapeError(f"expected an instant vector (a list), got {_kind(result)}")
    # A scalar or string result is a bare [time, "value"] pair: say so rather than "bad sample".
    if len(result) == 2 and isinstance(result[0], int | float) and isinstance(result[1], str):
        raise ResponseShapeError(f"expected an instant vector, got a scalar {result!r:.60}")
    return [_parse_sample(item) for item in result]


def _parse_sample(item: Any) -> Sample:
    if not isinstance(item, dict):
        raise ResponseShapeError(f"expected a sample object, got {_kind(item)}")
    metric, value = item.get("metric"), item.get("value")
    if not isinstance(metric, dict) or not all(isinstance(v, str) for v in metric.values()):
        raise ResponseShapeError(f"sample without a label map: {item!r:.120}")
    if not isinstance(value, list) or len(value) != 2 or not isinstance(value[1], str):
        raise ResponseShapeError(f'sample without a [time, "value"] pair: {item!r:.120}')
    try:
        number = float(value[1])
    except ValueError:
        raise ResponseShapeError(f"sample value {value[1]!r:.40} is not a number") from None
    return Sample(labels=dict(metric), value=number)


def le_buckets(samples: Sequence[Sample]) -> tuple[tuple[float, float], ...]:
    """A histogram's (le, value) pairs sorted by bound; series without `le`, with a bound that is
    not a number (a broken exporter or relabelling) or with NaN are left out."""
    out = []
    for s in samples:
        try:
            bound = float(s.labels["le"])
        except (KeyError, ValueError):
            continue
        if not (math.isnan(bound) or math.isnan(s.value)):
            out.append((bound, s.value))
    return tuple(sorted(out))


def _kind(obj: Any) -> str:
    return type(obj).__name__
