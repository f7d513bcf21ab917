"""`vllm-operator render` and the API server reach the same verdict on generated objects.

A seeded sample of careless and hostile VLLMServices (tests/support/mutations.py: one value, key
or entry of an example changed) goes through `render_text`, which `vllm-operator render` runs,
and through `kubectl apply --dry-run=server` with the generated CRD installed. Each object must be
accepted by both or refused by both; the assertion lists every disagreement at once.
"""

from __future__ import annotations

import pytest
import yaml

from tests.support.kube import Cluster
from tests.support.mutations import sample
from tests.support.operator import install_crds
from vllm_operator.api.errors import InvalidSpecError, parse_vllmservice
from vllm_operator.cli import UsageError
from vllm_operator.commands.render import render_text
from vllm_operator.config import OperatorConfig

pytestmark = pytest.mark.integration

SEED = 11
SAMPLE_SIZE = 500


def _render_verdict(text: str) -> str:
    """accept, refuse, or catalog: a valid object whose GPU type or hardware the operator's
    catalog refuses at render time (operator configuration the API server does not know)."""
    try:
        render_text(text, "generated.yaml", OperatorConfig())
    except UsageError:
        try:
            parse_vllmservice(yaml.safe_load(text))
        except InvalidSpecError:
            return "refuse"
        return "catalog"
    return "accept"


def test_render_and_the_api_server_agree_on_a_generated_sample(
    cluster: Cluster, namespace: str
) -> None:
    install_crds(cluster)
    disagreements = []
    verdicts = {"accept": 0, "refuse": 0, "catalog": 0}
    for change, obj in sample(SEED, SAMPLE_SIZE):
        if not change.startswith("metadata.namespace="):
            obj["metadata"]["namespace"] = namespace  # one that exists
        text = yaml.safe_dump(obj)
        server = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=text, check=False)
        ours = _render_verdict(text)
        verdicts[ours] += 1
        if (ours == "refuse") == (server.returncode == 0):
            disagreements.append(f"{change}: render {ours}, server: {server.stderr.strip()!r}")
    print(f"{SAMPLE_SIZE} generated objects, seed {SEED}: {verdicts}")
    assert disagreements == []
    # Both verdicts occur, so the sample tests something either way.
    assert verdicts["accept"] > 10 and verdicts["refuse"] > 10, verdicts
