"""`spec.resources`: CPU and host memory of each replica, and the Kubernetes quantities they use.

Each amount is both the request and the limit, so a vLLM pod is in the Guaranteed QoS class
(its GPUs already are: extended resources have request = limit) and the memory-backed /dev/shm
volume, which counts against the container's memory, has a limit behind it. Omitted amounts
come from the GPU catalog's per-GPU figures times spec.gpu.count.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Final

from pydantic import Field

from vllm_operator.api.base import SpecModel

# A subset of Kubernetes' quantity grammar that reads the same to people and to the API server:
# no exponents, no decimal SI suffixes for CPU, no fractions of a byte.
CPU_PATTERN: Final = r"^([1-9][0-9]{0,5}|[0-9]{1,6}\.[0-9]{1,3}|[1-9][0-9]{0,8}m)$"
MEMORY_PATTERN: Final = r"^[1-9][0-9]{0,15}(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$"
_BINARY: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
_DECIMAL: Final = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}

CPUQuantity = Annotated[str, Field(pattern=CPU_PATTERN, max_length=16)]
MemoryQuantity = Annotated[str, Field(pattern=MEMORY_PATTERN, max_length=18)]


class ResourcesSpec(SpecModel):
    cpu: CPUQuantity | None = Field(
        default=None,
        description=(
            'CPU per replica, request and limit, e.g. "8" or "7500m". Default: the GPU '
            "catalog's cpuPerGPU times spec.gpu.count."
        ),
    )
    memory: MemoryQuantity | None = Field(
        default=None,
        description=(
            "Host memory per replica, request and limit, e.g. 64Gi; it must cover /dev/shm "
            "(2Gi per GPU). Default: the GPU catalog's hostMemoryGiBPerGPU times spec.gpu.count."
        ),
    )


def parse_memory_bytes(quantity: str) -> int:
    """Bytes of a quantity that matched MEMORY_PATTERN."""
    match = re.fullmatch(r"([0-9]+)([A-Za-z]*)", quantity)
    if match is None:
        raise ValueError(f"not a memory quantity: {quantity!r}")
    number, suffix = match.groups()
    return int(number) * (_BINARY.get(suffix) or _DECIMAL.get(suffix) or 1)


def format_cpu(cores: float) -> str:
    """Cores as a quantity: whole cores plain ("8"), else millicores ("7500m")."""
    millis = int(Decimal(str(cores)) * 1000)
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_memory(gib: float) -> str:
    """GiB as a quantity: whole GiB as Gi, else whole MiB as Mi."""
    mib = int(Decimal(str(gib)) * 1024)
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"
