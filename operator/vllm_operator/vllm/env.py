"""vLLM 0.33's environment variables that decide whether it starts (vllm/envs.py)."""

from __future__ import annotations

from typing import Final

# lets --max-model-len exceed the model's derived maximum (vllm/config/model.py warns instead)
ALLOW_LONG_MAX_MODEL_LEN: Final = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"


def env_flag(value: str | None) -> bool:
    """A boolean variable as vllm/envs.py reads this one: "1" or "true", stripped, any case."""
    return value is not None and value.strip().lower() in ("1", "true")
