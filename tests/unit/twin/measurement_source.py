"""A one-point measurement file, for tests that replay or fit a point they control."""

from __future__ import annotations

from typing import Any

SETUP = {
    "vllm_version": "0.11.0",
    "gpu": "NVIDIA H100 SXM",
    "gpu_type": "H100",
    "gpu_profile": "H100-80GB",
    "gpu_count": 1,
    "tensor_parallel_size": 1,
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "model_profile": "Llama-3.1-8B",
    "dtype": "bf16",
    "quantization": "none",
    "prefix_caching": "off",
}
WORKLOAD = {
    "mode": "serve",
    "dataset": "random",
    "input_len": 256,
    "output_len": 16,
    "num_prompts": 8,
    "request_rate": "inf",
    "max_concurrency": 2,
    "ignore_eos": True,
}


def one_point(
    measured: dict[str, Any],
    *,
    split: str = "fit",
    setup: dict[str, Any] | None = None,
    workload: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Source `s`, point `c`: SETUP and WORKLOAD with the given fields replaced."""
    return {
        "schema_version": 1,
        "sources": [
            {
                "id": "s",
                "split": split,
                "title": "t",
                "url": "https://example.org/run",
                "kind": "blog",
                "tool": "vllm bench serve",
                "setup": {**SETUP, **(setup or {})},
                "workload": {**WORKLOAD, **(workload or {})},
                "points": [{"id": "c", "measured": measured}],
            }
        ],
    }
