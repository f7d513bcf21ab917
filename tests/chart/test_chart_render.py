"""The chart without a cluster: helm lint, golden renderings, values and schema, what it renders.

Refresh the goldens after an intended change, then review the diff like code:

    UPDATE_GOLDEN=1 .venv/bin/pytest tests/chart/test_chart_render.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.support import (
    CHART,
    GOLDEN_DIR,
    GOLDEN_NAMESPACE,
    GOLDEN_RELEASE,
    UPDATE,
    VALUES_DIR,
    Helm,
    documents,
    find,
    operator_container,
)
from vllm_operator.api.policy import DENIED_ENV, DENIED_FLAGS, denied_flag_pattern
from vllm_operator.config import load_operator_config

VALUES = sorted(VALUES_DIR.glob("*.yaml"))
FULLNAME = f"{GOLDEN_RELEASE}-vllm-operator"


def render(helm: Helm, values: str, *sets: str) -> list[dict[str, Any]]:
    return documents(helm.template(values=[VALUES_DIR / values], sets=list(sets)).stdout)


@pytest.mark.parametrize("values", VALUES, ids=lambda p: p.stem)
def test_helm_lint_is_clean(helm_bin: Helm, values: Path) -> None:
    out = helm_bin("lint", "--strict", str(CHART), "-f", str(values)).stdout
    assert "1 chart(s) linted, 0 chart(s) failed" in out
    assert "[WARNING]" not in out and "[ERROR]" not in out, out


@pytest.mark.parametrize("values", VALUES, ids=lambda p: p.stem)
def test_rendering_matches_its_golden(helm_bin: Helm, values: Path) -> None:
    text = helm_bin.template(values=[values]).stdout
    golden = GOLDEN_DIR / values.name
    if UPDATE:
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"no golden for {values.name}: run with UPDATE_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8"), (
        f"the chart renders {values.name} differently from tests/chart/golden/{values.name}; "
        "if intended, refresh with UPDATE_GOLDEN=1 and review the diff"
    )


def test_the_admission_policy_leaves_out_exactly_what_config_policy_allows(helm_bin: Helm) -> None:
    def expressions(*sets: str) -> list[str]:
        docs = render(helm_bin, "default.yaml", *sets)
        return [
            v["expression"] for v in find(docs, "ValidatingAdmissionPolicy")["spec"]["validations"]
        ]

    everything = expressions()
    assert len(everything) == len(DENIED_FLAGS) + len(DENIED_ENV)
    allowed = expressions(
        "config.policy.allowedFlags={--trust-remote-code,--host}",
        "config.policy.allowedEnv={LD_PRELOAD}",
    )
    trust, host = (
        denied_flag_pattern(d) for d in DENIED_FLAGS if d.name in ("--trust-remote-code", "--host")
    )
    gone = [e for e in everything if e not in allowed]
    assert len(gone) == 3 and any(trust in e for e in gone) and any(host in e for e in gone)
    assert any("'LD_PRELOAD'" in e for e in gone)
    with_images = expressions("config.policy.allowedImages={vllm/vllm-openai:*}")
    assert with_images[-1].endswith(
        "[r'^vllm/vllm-openai:.*$'].exists(p, object.spec.image.matches(p))"
    )
    assert "ValidatingAdmissionPolicy" not in {
        d["kind"] for d in render(helm_bin, "default.yaml", "admissionPolicy.enabled=false")
    }


def test_every_golden_has_its_values_file() -> None:
    assert {g.name for g in GOLDEN_DIR.glob("*.yaml")} == {v.name for v in VALUES}


def test_default_deployment_runs_one_operator_cluster_wide(helm_bin: Helm) -> None:
    docs = render(helm_bin, "default.yaml")
    assert sorted(d["kind"] for d in docs) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "NetworkPolicy",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    dep = find(docs, "Deployment", FULLNAME)
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == FULLNAME
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    c = operator_container(docs)
    assert c["image"] == "vllm-operator:0.1.0"  # appVersion
    assert c["command"] == ["vllm-operator", "run"]
    assert c["args"] == ["--all-namespaces", "--liveness=http://$(POD_IP):8080/healthz"]
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"health": 8080, "metrics": 8081}
    assert c["resources"]["limits"]["memory"] == "512Mi"
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["VLLM_OPERATOR_CONFIG"] == "/etc/vllm-operator/config.yaml"
    assert env["VLLM_OPERATOR_RESYNC_SECONDS"] == "300"
    # /metrics and /healthz bind the pod IP from the downward API, never 0.0.0.0.
    assert env["VLLM_OPERATOR_METRICS_ADDRESS"] == "$(POD_IP)"
    pod_ip = next(e for e in c["env"] if e["name"] == "POD_IP")
    assert pod_ip["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert set(mounts) == {"/etc/vllm-operator", "/tmp"}
    # every object carries the recommended labels
    for doc in docs:
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "vllm-operator"
        assert labels["app.kubernetes.io/instance"] == GOLDEN_RELEASE
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/version"] == "0.1.0"


def test_config_change_rolls_the_pod(helm_bin: Helm) -> None:
    def checksum(*sets: str) -> str:
        dep = find(render(helm_bin, "default.yaml", *sets), "Deployment")
        return str(dep["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum() == checksum()
    assert checksum() != checksum("config.prometheusUrl=http://other:9090")


def test_namespaced_mode_grants_roles_per_namespace_only(helm_bin: Helm) -> None:
    docs = render(helm_bin, "namespaced.yaml")
    c = operator_container(docs)
    assert c["args"] == [
        "--namespace=llm-prod",
        "--namespace=llm-staging",
        "--liveness=http://$(POD_IP):8080/healthz",
    ]
    roles = [d for d in docs if d["kind"] == "Role"]
    bindings = [d for d in docs if d["kind"] == "RoleBinding"]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["llm-prod", "llm-staging"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["llm-prod", "llm-staging"]
    for b in bindings:
        assert b["subjects"] == [
            {"kind": "ServiceAccount", "name": FULLNAME, "namespace": GOLDEN_NAMESPACE}
        ]
    # the cluster-scoped grants: kopf's reads of CRDs and namespaces, the nodes' GPU labels, and
    # the nodes and pods that say whether a GPU is free for a surge pod (docs/rollouts.md §3)
    cluster_role = find(docs, "ClusterRole")
    assert cluster_role["rules"] == [
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "verbs": ["list", "watch"],
        },
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
    ]


def test_full_values_run_ha_with_one_active_peer(helm_bin: Helm) -> None:
    docs = render(helm_bin, "full.yaml")
    assert not [d for d in docs if d["kind"] == "Deployment"]
    sts = find(docs, "StatefulSet", FULLNAME)
    assert sts["spec"]["replicas"] == 3
    assert sts["spec"]["serviceName"] == f"{FULLNAME}-peers"
    find(docs, "Service", f"{FULLNAME}-peers")
    assert find(docs, "ClusterKopfPeering")["metadata"]["name"] == FULLNAME
    c = operator_container(docs)
    assert c["image"] == (
        "registry.example.com/vllm-operator@sha256:"
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    )
    assert c["command"][:2] == ["/bin/sh", "-c"]
    script = c["command"][2]
    assert script.startswith("exec vllm-operator run ")
    assert f"--peering={FULLNAME}" in script
    assert "--priority=$(( 100 - ${POD_ID##*-} ))" in script
    # the kubelet expands $(VAR) for variables the container defines: none may occur here
    names = {e["name"] for e in c["env"]}
    assert not [n for n in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", script) if n in names]
    rules = find(docs, "ClusterRole")["rules"]
    assert {
        "apiGroups": ["kopf.dev"],
        "resources": ["clusterkopfpeerings"],
        "verbs": ["get", "list", "watch", "patch"],
    } in rules
    for kind in ("ServiceMonitor", "PrometheusRule"):
        assert find(docs, kind)["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    dashboard = find(docs, "ConfigMap", f"{FULLNAME}-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["vllm-operator.json"])["uid"] == "vllm-operator-services"


def test_namespaced_ha_puts_a_kopf_peering_in_each_watched_namespace(helm_bin: Helm) -> None:
    docs = render(helm_bin, "namespaced.yaml", "ha.enabled=true")
    peerings = [d for d in docs if d["kind"] == "KopfPeering"]
    assert sorted(p["metadata"]["namespace"] for p in peerings) == ["llm-prod", "llm-staging"]
    roles = [d for d in docs if d["kind"] == "Role"]
    leader = [r for r in roles if r["metadata"]["name"].endswith("-leader")]
    assert len(leader) == 1 and leader[0]["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "create", "update"],
        }
    ]
    for role in (r for r in roles if r not in leader):
        assert {
            "apiGroups": ["kopf.dev"],
            "resources": ["kopfpeerings"],
            "verbs": ["get", "list", "watch", "patch"],
        } in role["rules"]
    assert not [d for d in docs if d["kind"] == "ClusterKopfPeering"]


RBAC_KINDS = ("ClusterRole", "Role")
# the optional children, and a canary Deployment once judged (handlers/canary.py)
PRUNABLE = {"servicemonitors", "podmonitors", "networkpolicies", "deployments"}


@pytest.mark.parametrize("values", VALUES, ids=lambda p: p.stem)
def test_rbac_has_no_wildcards_secrets_or_broad_deletes(helm_bin: Helm, values: Path) -> None:
    docs = documents(helm_bin.template(values=[values], sets=["ha.enabled=true"]).stdout)
    rules = [r for d in docs if d["kind"] in RBAC_KINDS for r in d["rules"]]
    assert rules
    for rule in rules:
        assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"], rule
        assert not {"secrets", "configmaps"} & set(rule["resources"]), rule
        if "nodes" in rule["resources"]:  # GPU labels (status.gpu), free GPUs (rollouts): reads
            assert rule["verbs"] == ["get", "list"], rule
        assert not {"deletecollection", "escalate", "bind", "impersonate"} & set(rule["verbs"]), (
            rule
        )
        # delete only the optional children a spec may switch off (handlers/reconcile.py)
        if "delete" in rule["verbs"]:
            assert set(rule["resources"]) <= PRUNABLE, rule


@pytest.mark.parametrize("values", VALUES, ids=lambda p: p.stem)
def test_config_file_is_accepted_by_the_operator(
    helm_bin: Helm, values: Path, tmp_path: Path
) -> None:
    docs = documents(helm_bin.template(values=[values]).stdout)
    config = find(docs, "ConfigMap", FULLNAME)["data"]["config.yaml"]
    path = tmp_path / "config.yaml"
    path.write_text(config)
    cfg = load_operator_config({"VLLM_OPERATOR_CONFIG": str(path)})
    chart_config = yaml.safe_load(values.read_text()) or {}
    expected_url = chart_config.get("config", {}).get(
        "prometheusUrl", "http://prometheus-operated.monitoring.svc:9090"
    )
    assert cfg.prometheus_url == expected_url
    assert cfg.default_image == "vllm/vllm-openai:v0.33.0"
    assert cfg.metrics_window == "5m"
    assert cfg.gpu_catalog.get("H100-80GB") is not None
    if "full" in values.name:
        rtx = cfg.gpu_catalog.get("RTX-6000-ADA")
        assert rtx is not None and rtx.memory_gib == 48


def test_an_unknown_config_key_fails_the_operator_not_silently(
    helm_bin: Helm, tmp_path: Path
) -> None:
    from vllm_operator.config import ConfigError

    docs = render(helm_bin, "default.yaml", "config.maxBatchSize=8")
    path = tmp_path / "config.yaml"
    path.write_text(find(docs, "ConfigMap")["data"]["config.yaml"])
    with pytest.raises(ConfigError, match="maxBatchSize"):
        load_operator_config({"VLLM_OPERATOR_CONFIG": str(path)})


# --- values.yaml and values.schema.json ---------------------------------------------------------


def _leaf_paths(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict) and node:
        out = []
        for key, value in node.items():
            out += _leaf_paths(value, f"{prefix}.{key}" if prefix else str(key))
        return out
    return [prefix]


# Kubernetes structures given whole as a commented default: their own keys are the API's.
VERBATIM_BLOCKS = {"resources", "podSecurityContext", "securityContext"}


def test_every_values_key_is_commented() -> None:
    lines = (CHART / "values.yaml").read_text().splitlines()
    stack: list[tuple[int, str]] = []  # (indent, key) of the enclosing keys
    missing = []
    for n, line in enumerate(lines):
        m = re.match(r"^(\s*)([A-Za-z_][\w.-]*):(\s|$)", line)
        if not m:
            continue
        indent, key = len(m.group(1)), m.group(2)
        stack = [(i, k) for i, k in stack if i < indent]
        inside_verbatim = any(k in VERBATIM_BLOCKS for _, k in stack)
        stack.append((indent, key))
        if inside_verbatim:
            continue
        if not (n and lines[n - 1].strip().startswith("#")):
            missing.append(f"line {n + 1}: {key}")
    assert not missing, "values.yaml keys without a comment right above:\n" + "\n".join(missing)


def _schema_paths(schema: dict[str, Any], prefix: str = "") -> set[str]:
    props = schema.get("properties")
    if not props:
        return {prefix}
    out = set()
    for key, sub in props.items():
        path = f"{prefix}.{key}" if prefix else key
        out.add(path)
        out |= _schema_paths(sub, path)
    return out


def test_schema_describes_every_values_key() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())
    known = _schema_paths(schema)
    free_maps = {
        "resources",
        "podSecurityContext",
        "securityContext",
        "config.gpuCatalog",
        "grafanaDashboard.labels",
    }
    unknown = [
        p
        for p in _leaf_paths(values)
        if p not in known and not any(p.startswith(f + ".") or p == f for f in free_maps)
    ]
    assert not unknown, f"values without a schema entry: {unknown}"


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["bogus=1"], "additional properties 'bogus' not allowed"),
        (["watch.scope=Namespaced"], "/watch/namespaces"),
        (["watch.scope=Everywhere"], "/watch/scope"),
        (["ha.replicas=1"], "/ha/replicas"),
        (["image.digest=latest"], "/image/digest"),
        (["prometheusRule.ttftBurn.thresholdSeconds=0.4"], "/prometheusRule/ttftBurn"),
        (["prometheusRule.rejectionRatio.threshold=2"], "/prometheusRule/rejectionRatio"),
        (["metrics.serviceMonitor.interval=soon"], "/metrics/serviceMonitor/interval"),
        (["config.resyncSeconds=0"], "/config/resyncSeconds"),
    ],
)
def test_schema_refuses_bad_values(helm_bin: Helm, sets: list[str], message: str) -> None:
    proc = helm_bin.template(sets=sets, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr


def test_network_policy_admits_only_metrics_scrapes(helm_bin: Helm) -> None:
    (policy,) = [d for d in render(helm_bin, "default.yaml") if d["kind"] == "NetworkPolicy"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [
        {"ports": [{"port": "metrics", "protocol": "TCP"}], "from": [{"namespaceSelector": {}}]}
    ]
    off = render(helm_bin, "default.yaml", "networkPolicy.enabled=false")
    assert not [d for d in off if d["kind"] == "NetworkPolicy"]
