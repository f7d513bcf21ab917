"""The API server enforces the same rules as the pydantic models, with the same messages.

tests/unit/test_api_models.py runs these tables against the models; here the same objects go
through `kubectl apply` to the real API server with the generated CRD installed.
"""

from __future__ import annotations

import re

import pytest
import yaml

from tests.fixtures.specs.cases import BAD_SPECS, GOOD_SPECS, SpecCase, load_cases
from tests.support.kube import Cluster
from tests.support.operator import install_crds

pytestmark = pytest.mark.integration

BAD = load_cases(BAD_SPECS)
# a string value is quoted; an object element (an env entry) is left out: `Invalid value: MSG`
INVALID_VALUE = re.compile(r'Invalid value: (?:"(?:[^"\\]|\\.)*": )?')
GOOD = load_cases(GOOD_SPECS)


@pytest.fixture(scope="module")
def crds(cluster: Cluster) -> Cluster:
    install_crds(cluster)
    return cluster


def _in(case: SpecCase, namespace: str) -> str:
    obj = {**case.obj, "metadata": {**case.obj["metadata"], "namespace": namespace}}
    return yaml.safe_dump(obj)


@pytest.mark.parametrize("case", BAD, ids=[c.name for c in BAD])
def test_bad_spec_is_refused_by_the_api_server(
    crds: Cluster, namespace: str, case: SpecCase
) -> None:
    result = crds.kubectl("apply", "-f", "-", input=_in(case, namespace), check=False)
    assert result.returncode != 0, f"the API server accepted {case.name}"
    if case.source == "rule":
        # a rule with a fieldPath or on list elements: the API server puts its own
        # `Invalid value: "<the value, Go-quoted>": ` between the field and the message
        stderr = INVALID_VALUE.sub("", result.stderr)
        assert case.message and case.message in stderr, result.stderr
    else:
        assert case.field and case.field in result.stderr, result.stderr
    name = case.obj["metadata"]["name"]
    got = crds.kubectl(
        "get", "vllmservice", name, "-n", namespace, "--ignore-not-found", "-o", "name"
    )
    assert got.stdout.strip() == "", "a refused object was stored"


@pytest.mark.parametrize("case", GOOD, ids=[c.name for c in GOOD])
def test_good_spec_is_accepted_by_the_api_server(
    crds: Cluster, namespace: str, case: SpecCase
) -> None:
    result = crds.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=_in(case, namespace), check=False
    )
    assert result.returncode == 0, result.stderr
