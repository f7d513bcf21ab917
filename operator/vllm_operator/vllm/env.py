"""vLLM 0.33's environment variables that decide whether it starts (vllm/envs.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from vllm_operator.vllm.options import load_option_table

# lets --max-model-len exceed the model's derived maximum (vllm/config/model.py warns instead)
ALLOW_LONG_MAX_MODEL_LEN: Final = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"


def env_flag(value: str | None) -> bool:
    """A boolean variable as vllm/envs.py reads this one: "1" or "true", stripped, any case."""
    return value is not None and value.strip().lower() in ("1", "true")


def unknown_variables(names: Iterable[str]) -> list[str]:
    """The `VLLM_*` names vLLM 0.33 does not define (vllm/envs.py environment_variables, kept
    in options.json), in the order given: Platform.validate_environ warns of each at start, or
    exits on the first with --fail-on-environ-validation (serve_checks.py)."""
    known = load_option_table().environment
    return [name for name in names if name.startswith("VLLM_") and name not in known]
