"""The plan as the json contract (`-o json`) and as a table (`-o table`).

The contract: `{"points": [...], "recommendation": {"vllmService": {...}, "predicted": {...}}}`;
each point's `flags` are by vLLM dest name with the value vLLM runs, its default when the plan
left the flag out (null where vLLM's default is "no limit"). NaN (nothing measured) is null.
"""

from __future__ import annotations

import math
from typing import Any

from vllm_operator.planning.candidate import Target
from vllm_operator.planning.evaluate import Point
from vllm_operator.planning.planner import PlanResult
from vllm_operator.planning.search import WHOLE

FIGURES = (
    "throughput_rps",
    "output_tokens_per_s",
    "ttft_p50_s",
    "ttft_p95_s",
    "itl_p95_s",
    "e2e_mean_s",
    "kv_usage_max",
    "preemptions",
    "rejected_share",
    "slo_attainment",
    "meets_slo",
    "gpu_hours_per_hour",
    "cost_per_hour",
)


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else round(value, 6)
    return value


def point_json(point: Point) -> dict[str, Any]:
    out: dict[str, Any] = {
        "flags": dict(point.flags),
        "replicas": point.candidate.replicas,
        "gpu": point.candidate.gpu,
    }
    out.update({name: _clean(getattr(point, name)) for name in FIGURES})
    out["evaluated_on"] = "whole" if point.label == WHOLE else "search"
    out["step"] = point.label
    return out


def build_contract(result: PlanResult, manifest: dict[str, Any], target: Target) -> dict[str, Any]:
    return {
        "points": [point_json(p) for p in result.points],
        "recommendation": {
            "vllmService": manifest,
            "predicted": point_json(result.chosen.recommendation),
        },
        "slo": {
            "ttft_p95_s": target.ttft,
            "itl_p95_s": target.itl,
            "max_rejection_ratio": target.max_rejection,
            "margin": target.margin,
        },
    }


_BUDGET_SHORT = {
    "max_num_queued_reqs": "qreqs",
    "max_num_queued_tokens": "qtok",
    "max_num_seqs": "seqs",
    "max_num_active_seqs": "active",
    "max_num_batched_tokens": "mnbt",
}
COLUMNS = (
    "flags", "replicas", "GPU", "req/s", "out tok/s", "TTFT p50", "TTFT p95", "ITL p95",
    "E2E mean", "KV max", "preempt", "503", "meets SLO", "GPU-h/h", "$/h",
)  # fmt: skip


def _ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:.0f}ms"


def table_row(point: Point) -> list[str]:
    flags = " ".join(f"{_BUDGET_SHORT[d]}={v}" for d, v in point.candidate.budgets) or "defaults"
    if point.candidate.max_model_len is not None:
        flags += f" mml={point.candidate.max_model_len}"
    if point.label == WHOLE:
        flags += " (whole)"
    cost = "-" if point.cost_per_hour is None else f"{point.cost_per_hour:.2f}"
    return [
        flags,
        str(point.candidate.replicas),
        point.candidate.gpu,
        f"{point.throughput_rps:.2f}",
        f"{point.output_tokens_per_s:.0f}",
        _ms(point.ttft_p50_s),
        _ms(point.ttft_p95_s),
        "-" if math.isnan(point.itl_p95_s) else f"{point.itl_p95_s * 1000:.1f}ms",
        f"{point.e2e_mean_s:.2f}s",
        f"{point.kv_usage_max:.0%}",
        str(point.preemptions),
        f"{point.rejected_share:.1%}",
        "yes" if point.meets_slo else "no",
        f"{point.gpu_hours_per_hour:g}",
        cost,
    ]


def format_table(result: PlanResult, target: Target) -> str:
    rows = [list(COLUMNS), *(table_row(p) for p in result.points)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    rec = result.chosen.recommendation
    itl = "" if target.itl is None else f", ITL p95 <= {target.itl * 1000:g}ms"
    lines += [
        "",
        f"SLO: TTFT p95 <= {target.ttft * 1000:g}ms{itl}, 503 share <= "
        f"{target.max_rejection:.1%}; a point meets it with a {target.margin:.0%} margin",
        f"recommendation: {table_row(rec)[0].removesuffix(' (whole)')} on "
        f"{rec.candidate.replicas} x {rec.candidate.gpu}: TTFT p95 {_ms(rec.ttft_p95_s)}, "
        f"ITL p95 {rec.itl_p95_s * 1000:.1f}ms, 503 {rec.rejected_share:.1%}, "
        f"{rec.slo_attainment:.1%} of requests within the SLO",
    ]
    return "\n".join(lines)
