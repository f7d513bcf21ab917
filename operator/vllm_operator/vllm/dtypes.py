"""What vLLM 0.33.0 runs a model in, and which KV-cache dtypes it takes with it.

- `--dtype` is one of MODEL_DTYPES (argparse choices, `ModelDType` in vllm/config/model.py).
  `auto` is the checkpoint's dtype where the device supports it, else the platform's first
  supported dtype: a BF16 checkpoint runs in float16 on a GPU below compute capability 8.0
  (`_resolve_auto_dtype`, vllm/config/model.py). An explicit bfloat16 there starts and then
  fails when the worker checks the device (`check_if_supports_dtype`, vllm/platforms/cuda.py).
- `--kv-cache-dtype` is one of KV_CACHE_DTYPES (`CacheDType`, vllm/config/cache.py), checked
  when CacheConfig is built; an explicit float16 or bfloat16 must be the dtype the model runs
  in (`VllmConfig._reject_mismatched_float_kv_cache`, vllm/config/vllm.py).

The messages are vLLM's. The engine model (sim/engine/config.py) calls these at start-up.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

MODEL_DTYPES: Final = ("auto", "half", "float16", "bfloat16", "float", "float32")
# --dtype spelling -> the torch dtype's name (vllm/config/model.py _STR_DTYPE_TO_TORCH_DTYPE)
_TORCH_NAME: Final = {
    "half": "float16",
    "float16": "float16",
    "float": "float32",
    "float32": "float32",
    "bfloat16": "bfloat16",
}
KvCacheDtype = Literal[
    "auto",
    "float16",
    "bfloat16",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "fp8_inc",
    "fp8_ds_mla",
    "nvfp4_ds_mla",
    "turboquant_k8v4",
    "turboquant_4bit_nc",
    "turboquant_k3v4_nc",
    "turboquant_3bit_nc",
    "octave_k3v4",
    "octave_k3v3",
    "octave_k3v3_compact",
    "ultraquant_4bit",
    "int4_per_token_head",
    "int8_per_token_head",
    "fp8_per_token_head",
    "nvfp4",
    "nvfp4_4over6",
]
KV_CACHE_DTYPES: Final[tuple[str, ...]] = get_args(KvCacheDtype)
# the 16-bit float dtypes: an explicit KV-cache dtype of one must be the model's; what the
# engine model's step times and profiles are measured in
HALF_DTYPES: Final = ("bfloat16", "float16")


def bf16_supported(capability: str | None) -> bool:
    """Whether a device of this compute capability ("8.9"; None: not known) runs bfloat16."""
    if capability is None:
        return True
    major, _, minor = capability.partition(".")
    return (int(major), int(minor or 0)) >= (8, 0)


def resolve_model_dtype(flag: str, checkpoint: str, *, capability: str | None) -> str:
    """The torch dtype name the model runs in: `--dtype` `flag` on a `checkpoint` dtype, on a
    device of compute `capability`."""
    if flag != "auto":
        if flag not in _TORCH_NAME:
            raise ValueError(f"Unknown dtype: {flag!r}")
        return _TORCH_NAME[flag]
    # the platform's supported dtypes, preferred first (vllm/platforms/cuda.py)
    supported: tuple[str, ...] = ("float16", "float32")
    if bf16_supported(capability):
        supported = ("bfloat16", *supported)
    if checkpoint == "float32":  # float32 checkpoints are served in the preferred dtype
        return supported[0]
    return checkpoint if checkpoint in supported else supported[0]


def check_kv_cache_dtype(cache_dtype: str, model_dtype: str) -> None:
    """Raise vLLM's ValueError for a KV-cache dtype it refuses with a model in `model_dtype`."""
    if cache_dtype not in KV_CACHE_DTYPES:
        raise ValueError(
            f"Invalid kv_cache_dtype: {cache_dtype!r}. Valid values are: {list(KV_CACHE_DTYPES)}"
        )
    if cache_dtype not in HALF_DTYPES or cache_dtype == model_dtype:
        return
    allowed = f"`auto` or `{model_dtype}`" if model_dtype in HALF_DTYPES else "`auto`"
    raise ValueError(
        f'kv_cache_dtype="{cache_dtype}" is incompatible with dtype="{model_dtype}". '
        f"Please set `--kv-cache-dtype` to {allowed}."
    )


def check_device_dtype(model_dtype: str, *, capability: str | None, device_name: str) -> None:
    """Raise vLLM's ValueError when the worker finds the device cannot run `model_dtype`."""
    if model_dtype == "bfloat16" and not bf16_supported(capability):
        raise ValueError(
            "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
            f"Your {device_name} GPU has compute capability {capability}. You can use float16 "
            "instead by explicitly setting the `dtype` flag in CLI, for example: --dtype=half."
        )
