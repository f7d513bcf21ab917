"""What a run is scored on, from the client's side: per-minute SLO windows, 503s, GPU time.

A 1-minute window holds the requests that *arrived* in it. Its p95 meets the SLO when at least
95% of its requests got their first token within the TTFT SLO (a 503 or an unfinished request
never did) and at least 95% of the inter-token gaps of its completed requests are within the ITL
SLO: the nearest-rank p95, exact, with no histogram in between. Windows without arrivals are not
counted.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from vllm_operator.sim.report import Slo, percentile
from vllm_operator.sim.runner import RunRecord

WINDOW = 60.0


@dataclass(frozen=True)
class WindowStats:
    start: float
    requests: int
    ttft_ok: int
    gaps: int
    gaps_ok: int
    rejected: int
    ttft_p95: float | None  # of the completed requests, for the plots

    @property
    def met(self) -> bool:
        # integer form of ok >= ceil(0.95 n), free of float rounding
        return self.ttft_ok * 100 >= 95 * self.requests and self.gaps_ok * 100 >= 95 * self.gaps


def _gaps_ok(gaps: Sequence[float], limit: float) -> int:
    if not gaps or max(gaps) <= limit:
        return len(gaps)
    return bisect.bisect_right(sorted(gaps), limit)


def window_stats(
    records: Iterable[RunRecord], slo: Slo, start: float, end: float, offset: float = 0.0
) -> list[WindowStats]:
    """Windows of [start, end) in scenario time; a record's time is its arrival + `offset`."""
    count = max(0, math.ceil((end - start) / WINDOW - 1e-9))
    acc = [[0, 0, 0, 0, 0] for _ in range(count)]  # requests, ttft_ok, gaps, gaps_ok, rejected
    ttfts: list[list[float]] = [[] for _ in range(count)]
    for rec in records:
        k = math.floor((rec.arrival + offset - start) / WINDOW)
        if not 0 <= k < count:
            continue
        row = acc[k]
        row[0] += 1
        if rec.record is None:
            row[4] += rec.outcome == "rejected"
            continue
        ttft = rec.record.ttft
        ttfts[k].append(ttft)
        row[1] += ttft <= slo.ttft
        itls = rec.record.itls
        row[2] += len(itls)
        row[3] += _gaps_ok(itls, slo.itl)
    out = []
    for k, (n, ok, gaps, gaps_ok, rejected) in enumerate(acc):
        values = sorted(ttfts[k])
        p95 = percentile(values, 95) if values else None
        out.append(WindowStats(start + k * WINDOW, n, ok, gaps, gaps_ok, rejected, p95))
    return out


def window_share(windows: Sequence[WindowStats]) -> float:
    counted = [w for w in windows if w.requests]
    return sum(w.met for w in counted) / len(counted) if counted else 1.0


def is_503(rec: RunRecord) -> bool:
    """Refused for load: vLLM's admission 503s, or no ready replica (the Service has none)."""
    return rec.outcome == "rejected" and rec.reject_reason != "invalid"
