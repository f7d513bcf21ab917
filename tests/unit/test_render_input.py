"""`vllm-operator render` on careless and hostile input: one line per problem, exit 2, fast.

The property test feeds generated objects (tests/support/mutations.py) through the real command
line entry point; tests/integration/test_render_agreement.py sends the same kind of objects to
the API server and requires the same verdict.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.mutations import mutate
from vllm_operator.cli import main
from vllm_operator.commands.yamlinput import (
    MAX_DEPTH,
    MAX_INPUT_BYTES,
    InputError,
    decode_input,
    load_documents,
)

PROPERTY_EXAMPLES = 300
YAML_AT = "not valid YAML: line 1, column "
SMALLER = "a VLLMService is far smaller"
NO_CONSTRUCTOR = "could not determine a constructor for the tag 'tag:yaml.org,2002:python/"
BASE = (
    "apiVersion: serving.vllmop.io/v1alpha1\nkind: VLLMService\nmetadata: {name: x}\n"
    "spec:\n  model: m\n  gpu: {type: L4}\n"
)


def _bomb(levels: int) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels + 1):
        refs = ",".join([f"*a{level - 1}"] * 9)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "\n".join(lines)


def _render(tmp_path: Path, data: bytes, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    path = tmp_path / "in.yaml"
    path.write_bytes(data)
    code = main(["render", "-f", str(path)])
    return code, capsys.readouterr().err


def test_an_alias_bomb_fails_fast_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nested = "\n".join("        " + line for line in _bomb(8).splitlines())
    text = BASE + "  engine:\n    env:\n    - name: A\n      valueFrom:\n" + nested + "\n"
    assert len(text) < 1024  # 9**9 = 387 million strings once expanded
    code, err = _render(tmp_path, text.encode(), capsys)
    assert code == 2
    assert err == (
        f"vllm-operator render: error: {tmp_path / 'in.yaml'}: more than 100000 values once "
        "YAML aliases are expanded (an alias bomb?)\n"
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff\xfe\x00binary", "not UTF-8 text (byte 0 is 0xff)"),
        (BASE.encode() + b"\x80", f"not UTF-8 text (byte {len(BASE)} is 0x80)"),
        (b"[" * 10_000, f"nested deeper than {MAX_DEPTH} levels"),
        (b"a: [", f"{YAML_AT}5: expected the node content, but found '<stream end>'"),
        (b"x" * (MAX_INPUT_BYTES + 1), f"larger than {MAX_INPUT_BYTES} bytes; {SMALLER}"),
        (
            b"a: !!python/object:os.system x",
            f"{YAML_AT}4: {NO_CONSTRUCTOR}object:os.system'",
        ),
    ],
    ids=["binary", "bad-byte-late", "deep", "truncated", "too-large", "python-tag"],
)
def test_bad_bytes_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, message: str
) -> None:
    code, err = _render(tmp_path, data, capsys)
    assert (code, err) == (2, f"vllm-operator render: error: {tmp_path / 'in.yaml'}: {message}\n")


def test_values_read_as_kubectl_sends_them() -> None:
    (doc,) = load_documents("a: 8.0\nb: 2024-01-01\nc: 1.5\nd: 1.0e+30\n")
    assert doc == {"a": 8, "b": "2024-01-01", "c": 1.5, "d": 1e30}
    assert type(doc["a"]) is int


def test_a_namespace_must_be_a_dns_label(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = BASE.replace("{name: x}", "{name: x, namespace: Bad_NS}")
    code, err = _render(tmp_path, text.encode(), capsys)
    assert code == 2
    assert err.endswith(
        "metadata.namespace must be a DNS label: at most 63 lower-case letters, digits and '-', "
        "starting and ending with a letter or digit\n"
    )


def test_decode_input_refuses_more_than_the_cap() -> None:
    with pytest.raises(InputError):
        decode_input(b" " * (MAX_INPUT_BYTES + 1))
    assert decode_input(b" " * MAX_INPUT_BYTES) == " " * MAX_INPUT_BYTES


@settings(
    derandomize=True,
    max_examples=PROPERTY_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(rng=st.randoms(use_true_random=False))
def test_generated_objects_render_or_fail_with_field_named_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rng: random.Random
) -> None:
    change, obj = mutate(rng)
    code, err = _render(tmp_path, yaml.safe_dump(obj).encode(), capsys)
    assert code in (0, 2), change
    if code == 2:
        # One line per problem, each naming the file (and in it, the field).
        first, *more = err.splitlines()
        assert first.startswith(f"vllm-operator render: error: {tmp_path / 'in.yaml'}: "), change
        assert all(line.startswith(f"{tmp_path / 'in.yaml'}: ") for line in more), change
