"""observed_workload: one pod's share of what a service's clients sent, or why it is unknown."""

from __future__ import annotations

import pytest

from tests.unit.tuning.support import snap, spec
from vllm_operator.planning.lengths import Empirical
from vllm_operator.tuning.observed_workload import ServiceLoad, Unmeasured, observed_workload

PROMPTS = Empirical((100.0, 1000.0), (0.5, 1.0))
OUTPUTS = Empirical((10.0, 100.0), (0.25, 1.0))


def test_the_rate_is_shared_over_the_pods_that_reported() -> None:
    seen = observed_workload(
        spec(), snap(request_rate=9.0, pods_scraped=3, prompt_lengths=PROMPTS,
                     output_lengths=OUTPUTS)
    )  # fmt: skip
    assert isinstance(seen, ServiceLoad)
    assert (seen.workload.kind, seen.workload.rate, seen.pods) == ("poisson", 3.0, 3)
    assert (seen.workload.prompt, seen.workload.output) == (PROMPTS, OUTPUTS)
    assert (seen.gpu, seen.gpus_per_pod, seen.model) == ("H100-80GB", 1, "m")


def test_a_partial_snapshot_still_measures_the_pods_that_answered() -> None:
    seen = observed_workload(
        spec(), snap(quality="partial", pods_scraped=1, prompt_lengths=PROMPTS,
                     output_lengths=OUTPUTS)
    )  # fmt: skip
    assert isinstance(seen, ServiceLoad) and seen.workload.rate == 10.0


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"quality": "stale"}, "the metrics are stale"),
        ({"request_rate": None}, "no requests in the window"),
        ({"request_rate": 0.0}, "no requests in the window"),
        ({"prompt_lengths": None}, "no vllm:request_prompt_tokens histogram in the window"),
        ({"output_lengths": None}, "no vllm:request_generation_tokens histogram in the window"),
    ],
)
def test_what_is_not_measured_is_named(changes: dict[str, object], reason: str) -> None:
    base = {"prompt_lengths": PROMPTS, "output_lengths": OUTPUTS}
    assert observed_workload(spec(), snap(**{**base, **changes})) == Unmeasured(reason)
