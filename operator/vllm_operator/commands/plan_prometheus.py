"""`plan --from-prometheus URL --service NS/NAME [--window 1h]`: the workload a service sees."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from vllm_operator.cli import UsageError
from vllm_operator.config import OperatorConfig
from vllm_operator.metrics.prometheus import build_prometheus
from vllm_operator.metrics.workload import WorkloadQueryError, query_workload
from vllm_operator.planning.lengths import Lengths, empirical_from_buckets
from vllm_operator.planning.workload import Workload


def read_workload(
    args: argparse.Namespace, prompt: Lengths | None, output: Lengths | None
) -> Workload:
    """Poisson arrivals at the observed rate, lengths from the histograms unless given."""
    ns, _, name = args.service.partition("/")
    try:
        prom = build_prometheus(OperatorConfig(prometheus_url=args.from_prometheus))
        seen = query_workload(prom, ns, name, window=args.window, now=datetime.now(UTC))
        prompt = prompt or empirical_from_buckets(seen.prompt_buckets, seen.prompt_sum)
        output = output or empirical_from_buckets(seen.output_buckets, seen.output_sum)
    except (WorkloadQueryError, ValueError) as exc:
        raise UsageError(f"--from-prometheus: {exc}") from None
    label = f"{ns}/{name} over {args.window:g}s: {seen.rate:.3g} req/s"
    return Workload("poisson", label, rate=seen.rate, prompt=prompt, output=output)
