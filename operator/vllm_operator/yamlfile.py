"""A YAML file given by path (a profiles file, the operator's config, the measurement set): read
whole, every way it can fail said in one line that starts with the path.

A leaf: it imports only PyYAML, so the engine model (`sim`) and the commands read files alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class YamlFileError(ValueError):
    """The file cannot be read as YAML; the message is one line, starting with the path."""


def one_line_yaml_error(exc: yaml.YAMLError) -> str:
    """`not valid YAML: line L, column C: problem`, without PyYAML's multi-line context."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"not valid YAML: {where}{problem}"


def read_yaml_file(path: str | Path) -> Any:
    """The file's one YAML document (None when empty); YamlFileError when it is unreadable, not
    UTF-8, or not YAML."""
    try:
        return yaml.safe_load(Path(path).read_text("utf-8"))
    except OSError as exc:
        raise YamlFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise YamlFileError(f"{path}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise YamlFileError(f"{path}: {one_line_yaml_error(exc)}") from None
