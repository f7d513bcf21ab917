"""A small metrics registry and the Prometheus text exposition, written for the twin.

The twin must look like vLLM on `/metrics`, so this mirrors the prometheus_client conventions that
vLLM inherits (docs/vllm-0.33.md §3.1): counters are declared without `_total` and exposed
with it, histograms expose cumulative `_bucket{le=...}`, `_count` and `_sum`, summaries `_count`
and `_sum`, labels appear in declaration order. `_created` series are not emitted: nothing in the
operator reads them and they would only tie the output to wall-clock time.

Everything here is pure bookkeeping; there is no I/O and no global registry.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

# vLLM's /metrics answers with prometheus_client 0.26's content type (docs/vllm-0.33.md §3.1).
CONTENT_TYPE = "text/plain; version=1.0.0; charset=utf-8"

Kind = Literal["counter", "gauge", "histogram", "summary"]
LabelValues = tuple[str, ...]


def format_value(value: float) -> str:
    """Sample value text: Python's shortest repr, with Prometheus spellings for the specials."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _label_text(names: Sequence[str], values: Sequence[str]) -> str:
    if not names:
        return ""
    pairs = ",".join(f'{n}="{_escape_label(v)}"' for n, v in zip(names, values, strict=True))
    return "{" + pairs + "}"


@dataclass
class _HistogramState:
    # per-bucket (non-cumulative) counts; the +Inf bucket is the last slot
    counts: list[int]
    total: float = 0.0


@dataclass
class MetricFamily:
    """One metric name with its children, keyed by label values in declaration order."""

    name: str
    help: str
    kind: Kind
    labelnames: tuple[str, ...]
    buckets: tuple[float, ...] = ()
    _values: dict[LabelValues, float] = field(default_factory=dict)
    _hist: dict[LabelValues, _HistogramState] = field(default_factory=dict)

    def _key(self, labels: Sequence[str]) -> LabelValues:
        if len(labels) != len(self.labelnames):
            raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {tuple(labels)}")
        return tuple(str(v) for v in labels)

    def touch(self, *labels: str) -> None:
        """Create the child at zero so that the series exists before its first event."""
        key = self._key(labels)
        if self.kind in ("histogram", "summary"):
            self._hist.setdefault(key, _HistogramState(counts=[0] * (len(self.buckets) + 1)))
        else:
            self._values.setdefault(key, 0.0)

    def inc(self, amount: float = 1.0, *labels: str) -> None:
        if self.kind not in ("counter", "gauge"):
            raise TypeError(f"{self.name} is a {self.kind}; inc() needs a counter or gauge")
        if self.kind == "counter" and amount < 0:
            raise ValueError(f"{self.name}: counters only go up (got {amount})")
        key = self._key(labels)
        self._values[key] = self._values.get(key, 0.0) + amount

    def set(self, value: float, *labels: str) -> None:
        if self.kind != "gauge":
            raise TypeError(f"{self.name} is a {self.kind}; set() needs a gauge")
        self._values[self._key(labels)] = float(value)

    def observe(self, value: float, *labels: str) -> None:
        if self.kind not in ("histogram", "summary"):
            raise TypeError(f"{self.name} is a {self.kind}; observe() needs a histogram/summary")
        key = self._key(labels)
        state = self._hist.get(key)
        if state is None:
            state = _HistogramState(counts=[0] * (len(self.buckets) + 1))
            self._hist[key] = state
        # `le` is inclusive: a value equal to a bound belongs to that bucket
        state.counts[bisect.bisect_left(self.buckets, value)] += 1
        state.total += value

    def value(self, *labels: str) -> float:
        """Current counter/gauge value (0 for a child never touched); for tests and reports."""
        return self._values.get(self._key(labels), 0.0)

    def count(self, *labels: str) -> int:
        """Number of observations of a histogram/summary child."""
        state = self._hist.get(self._key(labels))
        return 0 if state is None else sum(state.counts)

    def render(self) -> Iterable[str]:
        exposed = f"{self.name}_total" if self.kind == "counter" else self.name
        yield f"# HELP {exposed} {_escape_help(self.help)}"
        yield f"# TYPE {exposed} {self.kind}"
        if self.kind in ("counter", "gauge"):
            for key, val in self._values.items():
                yield f"{exposed}{_label_text(self.labelnames, key)} {format_value(val)}"
            return
        for key, state in self._hist.items():
            yield from self._render_observations(key, state)

    def _render_observations(self, key: LabelValues, state: _HistogramState) -> Iterable[str]:
        labels = _label_text(self.labelnames, key)
        if self.kind == "histogram":
            names = (*self.labelnames, "le")
            running = 0
            bounds = [format_value(b) for b in self.buckets] + ["+Inf"]
            for bound, n in zip(bounds, state.counts, strict=True):
                running += n
                le_labels = _label_text(names, (*key, bound))
                yield f"{self.name}_bucket{le_labels} {format_value(running)}"
        yield f"{self.name}_count{labels} {format_value(sum(state.counts))}"
        yield f"{self.name}_sum{labels} {format_value(state.total)}"


class Registry:
    """Families in registration order; `render()` is the body of a `/metrics` answer."""

    def __init__(self) -> None:
        self._families: dict[str, MetricFamily] = {}

    def _add(self, family: MetricFamily) -> MetricFamily:
        if family.name in self._families:
            raise ValueError(f"metric {family.name} registered twice")
        self._families[family.name] = family
        return family

    def counter(self, name: str, help: str, labelnames: Sequence[str] = ()) -> MetricFamily:
        if name.endswith("_total"):
            # prometheus_client strips and re-adds the suffix; declaring it would hide that
            raise ValueError(f"declare counter {name} without the _total suffix")
        return self._add(MetricFamily(name, help, "counter", tuple(labelnames)))

    def gauge(self, name: str, help: str, labelnames: Sequence[str] = ()) -> MetricFamily:
        return self._add(MetricFamily(name, help, "gauge", tuple(labelnames)))

    def histogram(
        self, name: str, help: str, labelnames: Sequence[str], buckets: Sequence[float]
    ) -> MetricFamily:
        bounds = tuple(float(b) for b in buckets if not math.isinf(b))
        if list(bounds) != sorted(set(bounds)) or not bounds:
            raise ValueError(f"{name}: buckets must be strictly increasing, got {list(buckets)}")
        return self._add(MetricFamily(name, help, "histogram", tuple(labelnames), bounds))

    def summary(self, name: str, help: str, labelnames: Sequence[str] = ()) -> MetricFamily:
        return self._add(MetricFamily(name, help, "summary", tuple(labelnames)))

    def get(self, name: str) -> MetricFamily:
        return self._families[name]

    def render(self) -> str:
        lines: list[str] = []
        for family in self._families.values():
            lines.extend(family.render())
        return "\n".join(lines) + "\n" if lines else ""


def request_token_buckets(max_model_len: int) -> list[float]:
    """vLLM's 1-2-5 series up to max_model_len, used by the per-request token histograms.

    docs/vllm-0.33.md §3.3: for 32768 the series is 1, 2, 5, ..., 10000, 20000 (bounds above
    max_model_len are dropped, so the last bound can be below it).
    """
    out: list[float] = []
    mantissas = (1, 2, 5)
    exponent = 0
    while True:
        for m in mantissas:
            bound = m * 10**exponent
            if bound > max_model_len:
                return out
            out.append(float(bound))
        exponent += 1
