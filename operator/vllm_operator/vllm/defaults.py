"""The `max_num_batched_tokens` / `max_num_seqs` vLLM 0.33.0 picks for `vllm serve` per device.

EngineArgs.get_batch_defaults (vllm/engine/arg_utils.py), usage context OPENAI_API_SERVER, for
CUDA/ROCm devices, by the total memory torch reports. GB10 (DGX Spark, compute capability 12.1)
has 120 GiB of unified memory but stays on the small tier: that exclusion is new in 0.33.0.
The parity tier checks every catalog GPU, B200 and GB10 against vLLM's own code.
"""

from __future__ import annotations

from typing import Final, NamedTuple

LARGE_GIB: Final = 160  # B200/B300, MI300X
MEDIUM_GIB: Final = 70  # H100, H200 (but not A100 80GB, not GB10)
GB10_CAPABILITY: Final = (12, 1)


class BatchDefaults(NamedTuple):
    max_num_batched_tokens: int
    max_num_seqs: int


LARGE: Final = BatchDefaults(16384, 1024)
MEDIUM: Final = BatchDefaults(8192, 1024)
SMALL: Final = BatchDefaults(2048, 256)


def is_gb10(device_name: str, capability: tuple[int, int] | None = None) -> bool:
    """GB10 as vLLM sees it (capability 12.1); by name where the capability is not known."""
    if capability is not None:
        return capability == GB10_CAPABILITY
    return "gb10" in device_name.lower()


def batch_defaults(
    device_name: str, memory_gib: float, capability: tuple[int, int] | None = None
) -> BatchDefaults:
    """vLLM's defaults on a device of `memory_gib` total memory named `device_name`."""
    if memory_gib >= LARGE_GIB:
        return LARGE
    if memory_gib >= MEDIUM_GIB and "a100" not in device_name.lower():
        return SMALL if is_gb10(device_name, capability) else MEDIUM
    return SMALL
