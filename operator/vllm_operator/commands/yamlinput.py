"""Reading a user's YAML file with caps, so hostile input fails fast with one line.

The API server takes at most ~1.5 MB per request, and kubectl's YAML decoder bounds alias
expansion; `vllm-operator render` does the same here: a size cap, a nesting cap and a cap on the
nodes a document holds once its aliases are expanded (a 1 KB "billion laughs" would otherwise
expand to gigabytes when validated). PyYAML's composer recurses once per nesting level, so the
depth cap also keeps a deep document from ending in RecursionError.

Values are read as kubectl sends them: kubectl turns YAML into JSON, where 8.0 is written 8 and a
date is a string, so the models see the same types the API server would.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from vllm_operator.yamlfile import one_line_yaml_error

MAX_INPUT_BYTES: Final = 1024 * 1024
MAX_DEPTH: Final = 64
MAX_EXPANDED_NODES: Final = 100_000
_TIMESTAMP: Final = "tag:yaml.org,2002:timestamp"


class InputError(ValueError):
    """The input is not YAML this command reads; the message is one line."""


class _CappedLoader(yaml.SafeLoader):
    depth = 0
    # Dates stay strings, as in kubectl's YAML-to-JSON conversion.
    yaml_implicit_resolvers = {  # noqa: RUF012 (PyYAML reads it from the class)
        first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise InputError(f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _check_expanded_size(root: yaml.Node) -> None:
    """Count nodes as construction would visit them, aliases expanded; stop at the cap."""
    stack = [root]
    count = 0
    while stack:
        node = stack.pop()
        count += 1
        if count > MAX_EXPANDED_NODES:
            raise InputError(
                f"more than {MAX_EXPANDED_NODES} values once YAML aliases are expanded "
                "(an alias bomb?)"
            )
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.extend((key, value))


def _as_json_sends_it(value: Any) -> Any:
    """Integral floats within int64 become ints, as Go's encoder writes them and the API
    server's decoder reads them back (1.0 -> 1); everything else is unchanged."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    if isinstance(value, dict):
        return {key: _as_json_sends_it(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_json_sends_it(item) for item in value]
    return value


def decode_input(data: bytes) -> str:
    """UTF-8 text of `data`, within the size cap; InputError otherwise."""
    if len(data) > MAX_INPUT_BYTES:
        raise InputError(f"larger than {MAX_INPUT_BYTES} bytes; a VLLMService is far smaller")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x})") from None


def load_documents(text: str) -> list[Any]:
    """Every non-empty document of `text`. InputError (one line) on bad or oversized YAML."""
    loader = _CappedLoader(text)
    docs = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                break
            _check_expanded_size(node)
            doc = loader.construct_document(node)
            if doc is not None:
                docs.append(_as_json_sends_it(doc))
    except yaml.YAMLError as exc:
        raise InputError(one_line_yaml_error(exc)) from None
    except (ValueError, TypeError, OverflowError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"not valid YAML: {str(exc).splitlines()[0]}") from None
    finally:
        loader.dispose()
    return docs
