"""The chart's ValidatingAdmissionPolicy on the real API server agrees with the operator's policy.

The policy is rendered from the chart (watch.scope Namespaced, so its binding covers only this
test's namespace on the shared cluster) and applied alone. A seeded sample of extraArgs elements
(spellings of every denied flag and of their negatives, from test_policy_properties.py's
generator idea, plus elements that are no flag) goes through `kubectl apply --dry-run=server`
and through `find_policy_violations`; each must be refused by both or accepted by both.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.chart.cluster_helpers import release_name
from tests.chart.support import Helm, documents
from tests.support.kube import Cluster
from tests.support.wait import wait_until
from vllm_operator.api.errors import InvalidSpecError, parse_vllmservice
from vllm_operator.api.policy import DENIED_FLAGS, PolicyConfig, find_policy_violations
from vllm_operator.vllm.options import load_option_table

pytestmark = pytest.mark.integration

SEED = 20
SAMPLE_SIZE = 80
POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


def _svc(namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "serving.vllmop.io/v1alpha1",
        "kind": "VLLMService",
        "metadata": {"name": "policy-case", "namespace": namespace},
        "spec": {"model": "Qwen/Qwen2.5-0.5B-Instruct", "gpu": {"type": "L4"}, **spec},
    }


def _server_refuses(cluster: Cluster, obj: dict[str, Any]) -> str | None:
    out = cluster.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(obj), check=False
    )
    return out.stderr if out.returncode != 0 else None


class AdmissionPolicy:
    def __init__(self, cluster: Cluster, helm_bin: Helm, namespace: str) -> None:
        self.cluster, self.helm_bin, self.namespace = cluster, helm_bin, namespace
        self.applied: list[dict[str, Any]] = []

    def install(self, *sets: str) -> None:
        """Render and apply the policy with `sets`; wait until the API server enforces it."""
        self.remove()
        rendered = self.helm_bin.template(
            release=release_name(),
            sets=["watch.scope=Namespaced", f"watch.namespaces={{{self.namespace}}}", *sets],
        ).stdout
        self.applied = [d for d in documents(rendered) if d["kind"] in POLICY_KINDS]
        assert [d["kind"] for d in self.applied] == list(POLICY_KINDS)
        self.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(self.applied))
        wait_until(
            lambda: "denies" in (_server_refuses(self.cluster, self._probe()) or ""),
            timeout=60,
            what="the ValidatingAdmissionPolicy to be enforced",
        )

    def remove(self) -> None:
        """Delete the policy and wait until the API server no longer enforces it (it keeps
        compiled policies a moment after the delete)."""
        if not self.applied:
            return
        for doc in self.applied:
            name = doc["metadata"]["name"]
            self.cluster.kubectl("delete", doc["kind"], name, "--ignore-not-found", check=False)
        self.applied = []
        wait_until(
            lambda: _server_refuses(self.cluster, self._probe()) is None,
            timeout=60,
            what="the deleted ValidatingAdmissionPolicy to stop being enforced",
        )

    def _probe(self) -> dict[str, Any]:
        """Denied by every policy the tests install, admitted by the CRD."""
        return _svc(self.namespace, engine={"extraArgs": ["--host=0.0.0.0"]})


@pytest.fixture
def admission(
    cluster: Cluster, helm_bin: Helm, current_crds: None, namespace: str
) -> Iterator[AdmissionPolicy]:
    policy = AdmissionPolicy(cluster, helm_bin, namespace)
    yield policy
    policy.remove()


def _sample(rng: random.Random) -> list[str]:
    table = load_option_table()
    tokens = []
    for _ in range(SAMPLE_SIZE):
        if rng.random() < 0.15:
            tokens.append(rng.choice(["--enforce-eager", "0.0.0.0", "--dtype=half", "-O3"]))
            continue
        denied = rng.choice(DENIED_FLAGS)
        spelling = rng.choice(table.by_string[denied.name].strings)
        cut = rng.randint(3, len(spelling))
        body = "".join(rng.choice("-_") if ch == "-" else ch for ch in spelling[2:cut])
        tokens.append("--" + body + rng.choice(["", "=1", "=/x", ".a=1"]))
    return tokens


def _admissible(obj: dict[str, Any]) -> bool:
    """Accepted by the CRD itself (owned flags, removed knobs): only the policy is compared."""
    try:
        parse_vllmservice(obj)
    except InvalidSpecError:
        return False
    return True


def test_the_admission_policy_and_the_operator_agree_on_a_generated_sample(
    cluster: Cluster, admission: AdmissionPolicy, namespace: str
) -> None:
    admission.install()
    disagreements, verdicts = [], {"refused": 0, "accepted": 0}
    for token in _sample(random.Random(SEED)):
        obj = _svc(namespace, engine={"extraArgs": [token]})
        if not _admissible(obj):
            continue
        spec = parse_vllmservice(obj).spec
        ours = bool(find_policy_violations(spec, PolicyConfig(), "vllm/vllm-openai:v0.33.0"))
        server = _server_refuses(cluster, obj)
        verdicts["refused" if ours else "accepted"] += 1
        if ours != (server is not None and "policy" in server):
            disagreements.append(f"{token!r}: operator refuses={ours}, server: {server!r}")
    print(f"{SAMPLE_SIZE} generated elements, seed {SEED}: {verdicts}")
    assert disagreements == []
    assert verdicts["refused"] > 20 and verdicts["accepted"] > 5, verdicts


def test_allow_lists_let_exactly_what_they_name_through(
    cluster: Cluster, admission: AdmissionPolicy, namespace: str
) -> None:
    env = [{"name": "LD_PRELOAD", "value": "/x.so"}]
    refused = _server_refuses(cluster, _svc(namespace, engine={"env": env}))
    assert refused is None  # no policy yet: the CRD alone admits it
    admission.install()
    refused = _server_refuses(cluster, _svc(namespace, engine={"env": env}))
    assert refused is not None and "spec.engine.env: LD_PRELOAD is denied" in refused

    admission.install(
        "config.policy.allowedFlags={--trust-remote-code}",
        "config.policy.allowedEnv={LD_PRELOAD}",
        "config.policy.allowedImages={vllm/vllm-openai:*,registry.example.com/vllm/*}",
    )
    allowed = {"extraArgs": ["--trust_remote_code"], "env": env}
    assert _server_refuses(cluster, _svc(namespace, engine=allowed)) is None
    refused = _server_refuses(cluster, _svc(namespace, engine={"extraArgs": ["--uds=/s"]}))
    assert refused is not None and "vLLM's --uds" in refused
    for image, ok in [
        ("vllm/vllm-openai:v0.33.0", True),
        ("registry.example.com/vllm/openai:1", True),
        ("registry.example.com/other/openai:1", False),
        ("evil.example/vllm/vllm-openai:v0.33.0", False),
    ]:
        verdict = _server_refuses(cluster, _svc(namespace, image=image))
        assert (verdict is None) == ok, (image, verdict)
        cfg = PolicyConfig(allowed_images=["vllm/vllm-openai:*", "registry.example.com/vllm/*"])
        assert cfg.image_allowed(image) == ok, image
