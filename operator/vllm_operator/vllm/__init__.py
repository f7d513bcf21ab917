"""vLLM 0.33.0's facts, in one place.

Everything the operator, the engine model and the twin know about `vllm serve` that vLLM itself
decides: flag spellings, aliases, value syntax and defaults (`flags`, `numbers`), the full list of
option strings its parser accepts and how a token resolves to one of them (`options`), the
per-GPU batch defaults (`defaults`) and the cross-field rules it raises at start-up (`rules`).
The parity tier (tests/parity, docs/parity.md) proves each of them against vLLM 0.33.0's own
parser and config classes. Pure: no I/O library, no operator layer above it.
"""

from typing import Final

VLLM_VERSION: Final = "0.33.0"
