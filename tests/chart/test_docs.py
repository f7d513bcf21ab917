"""The generated CRD reference is current; the hand-written docs cover what they promise."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.support.kube import ROOT
from vllm_operator import constants
from vllm_operator.api.crd import build_openapi_schema
from vllm_operator.tools import gen_docs
from vllm_operator.tuning.reasons import Reason

DOCS = ROOT / "docs"


def test_crd_reference_is_generated_from_the_models() -> None:
    assert gen_docs.main(["--check", "--root", str(ROOT)]) == 0, (
        "docs/crd-reference.md or tuning.md is stale: run `python -m vllm_operator.tools.gen_docs`"
    )


def _stale_tuning_page(root: Path) -> Path:
    page = root / "docs" / "tuning.md"
    page.write_text(
        f"# Tuning\n\nhand-written\n\n{gen_docs.REASONS_BEGIN}\n| `Old` |\n"
        f"{gen_docs.REASONS_END}\n\nmore hand-written\n"
    )
    return page


def test_gen_docs_check_fails_on_a_stale_page(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "crd-reference.md").write_text("# old\n")
    (tmp_path / "docs" / "tuning.md").write_text((DOCS / "tuning.md").read_text())
    assert gen_docs.main(["--check", "--root", str(tmp_path)]) == 1
    assert gen_docs.main(["--root", str(tmp_path)]) == 0
    assert gen_docs.main(["--check", "--root", str(tmp_path)]) == 0


def test_the_reason_table_is_regenerated_and_the_rest_of_the_page_kept(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "crd-reference.md").write_text(gen_docs.render_reference())
    page = _stale_tuning_page(tmp_path)
    assert gen_docs.main(["--check", "--root", str(tmp_path)]) == 1
    assert gen_docs.main(["--root", str(tmp_path)]) == 0
    text = page.read_text()
    assert "`Old`" not in text
    assert text.startswith("# Tuning\n\nhand-written\n") and text.endswith("more hand-written\n")
    for reason in Reason:
        assert f"| `{reason.value}` | `{reason.kind}` | {reason.meaning} |" in text


def test_tuning_md_names_every_reason_in_its_generated_table() -> None:
    text = (DOCS / "tuning.md").read_text()
    table = text.split(gen_docs.REASONS_BEGIN)[1].split(gen_docs.REASONS_END)[0]
    assert [line.split("`")[1] for line in table.strip().splitlines()[2:]] == [
        r.value for r in Reason
    ]


def test_crd_reference_lists_every_spec_field_with_its_description() -> None:
    text = (DOCS / "crd-reference.md").read_text()
    spec = build_openapi_schema()["properties"]["spec"]
    for name, node in spec["properties"].items():
        assert f"`spec.{name}`" in text
        assert node["description"] in text


def test_troubleshooting_has_a_section_for_every_condition_reason() -> None:
    text = (DOCS / "troubleshooting.md").read_text()
    headings = set(re.findall(r"^### (\w+)$", text, flags=re.M))
    reasons = {v for k, v in vars(constants).items() if k.startswith("REASON_")}
    assert reasons <= headings, f"reasons without a section: {sorted(reasons - headings)}"


def test_alert_links_point_at_troubleshooting_sections() -> None:
    text = (DOCS / "troubleshooting.md").read_text()
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", text, flags=re.M)
    }
    rules = (ROOT / "charts" / "vllm-operator" / "templates" / "prometheusrule.yaml").read_text()
    linked = set(re.findall(r"docs/troubleshooting\.md#([a-z0-9-]+)", rules))
    assert linked and linked <= anchors, sorted(linked - anchors)


def test_user_guide_links_the_tuning_rules_and_its_siblings() -> None:
    text = (DOCS / "user-guide.md").read_text()
    assert "## Controller rules" in text and "(tuning.md)" in text
    for target in re.findall(r"\]\(([a-z-]+\.md)(?:#[^)]*)?\)", text):
        if target != "tuning.md":  # written by the controller work
            assert (DOCS / target).exists(), target


def test_gitops_examples_are_well_formed() -> None:
    base = ROOT / "examples" / "gitops"
    docs = [
        d
        for path in sorted(base.rglob("*.yaml"))
        for d in yaml.safe_load_all(path.read_text())
        if d
    ]
    kinds = {(d["apiVersion"], d["kind"]) for d in docs}
    assert kinds == {
        ("argoproj.io/v1alpha1", "Application"),
        ("v1", "ConfigMap"),
        ("source.toolkit.fluxcd.io/v1", "GitRepository"),
        ("helm.toolkit.fluxcd.io/v2", "HelmRelease"),
        ("kustomize.toolkit.fluxcd.io/v1", "Kustomization"),
    }
    release = next(d for d in docs if d["kind"] == "HelmRelease")
    assert release["spec"]["install"]["crds"] == "CreateReplace"
    assert release["spec"]["upgrade"]["crds"] == "CreateReplace"
    assert release["spec"]["chart"]["spec"]["chart"] == "charts/vllm-operator"
    kustomization = next(d for d in docs if d["kind"] == "Kustomization")
    (expr,) = kustomization["spec"]["healthCheckExprs"]
    assert (expr["apiVersion"], expr["kind"]) == (constants.API_VERSION, constants.KIND)
    apps = [d for d in docs if d["kind"] == "Application"]
    assert apps[0]["spec"]["source"]["path"] == "charts/vllm-operator"
    assert all("ServerSideApply=true" in a["spec"]["syncPolicy"]["syncOptions"] for a in apps)
