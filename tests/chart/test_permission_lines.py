"""The chart tier's check of the operator log for refusals (cluster_helpers.permission_problems)
finds the API's refusals and not the digits of a time or a generated name."""

from __future__ import annotations

from tests.chart.cluster_helpers import permission_problems

REFUSALS = [
    "cannot post the Ready Event of ns/chat: (403)",
    "Reason: Forbidden",
    'HTTP response body: {"message":"events is forbidden: User cannot create"}',
    "Not enough permissions to watch for resources: changes will not be noticed",
    "HTTP 403 from the API server",
]
ORDINARY = [
    "2026-12-04T23:52:08.323Z INFO vllm_operator: t-340355d9cf/chat Ready=True: 1/1 ready.",
    "2026-12-05T00:14:03.403Z INFO vllm_operator: t-0bab45534a/model Hold WithinSLO: fine",
    "2026-12-05T00:14:03.775Z INFO vllm_operator: t-1234567403/model Hold: 8403 tokens",
]


def test_refusals_are_found_and_names_and_times_with_403_in_them_are_not() -> None:
    assert permission_problems("\n".join(REFUSALS + ORDINARY)) == REFUSALS


def test_an_allowed_refusal_is_left_out() -> None:
    log = "\n".join(REFUSALS[:2])
    assert permission_problems(log, allowed=("(403)",)) == REFUSALS[1:2]
