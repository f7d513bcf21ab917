"""What vLLM 0.33 checks against the model at start-up, checked at render time where it is known.

A spec that passes the API server can still make every pod exit: a KV-cache dtype or model
dtype vLLM refuses for the model and GPU, a maxModelLen above the model's context length, a
tensor parallel size that does not divide its attention heads. The renderer refuses these with
the field to fix. It knows a model's checkpoint dtype, context length and heads, and a GPU's
compute capability, only for what the engine profiles describe (sim/profiles), so it refuses
only where vLLM's refusal is certain, never on a guess: a model without a profile, or extraArgs
that can change what its config says (a quantization, another revision or config, config
overrides), is checked only against an explicit `--dtype`.

- Dtypes: an explicit `--kv-cache-dtype float16` (or `bfloat16`) must be the dtype the model runs
  in, and bfloat16 needs compute capability 8.0; the model runs in extraArgs' `--dtype`, or with
  `auto` in its checkpoint's dtype where the GPU supports it (vllm/dtypes.py says where vLLM
  checks each, and its functions are called here, so the rules live in one place).
- Context: `--max-model-len` above the model's derived maximum (max_position_embeddings) is
  refused unless `VLLM_ALLOW_LONG_MAX_MODEL_LEN` is 1 or true (vllm/config/model.py,
  vllm/envs.py).
- Heads: the tensor parallel size must divide the attention heads
  (`ModelConfig.verify_with_parallel_config`).
- Weights: a GPU's share of the weights (over tensor and pipeline parallel ranks) above what
  vLLM may use of it (`--gpu-memory-utilization` of its memory, or all of it where
  `--kv-cache-memory-bytes` replaces the profile) cannot leave room for the KV cache ("No
  available memory for the cache blocks") or does not load at all. Only the weights are counted:
  activations, CUDA graphs and the rest only add to them, so the refusal is certain; the twin's
  memory model (sim/engine/memory.py) refuses more, nearer the line. Offloading or quantizing
  weights (extraArgs) switches this check off.
"""

from __future__ import annotations

import math
from typing import Final

from vllm_operator.api import flags
from vllm_operator.api.spec import EngineSpec, VLLMServiceSpec
from vllm_operator.render.args import compute_parallel_sizes
from vllm_operator.render.errors import RenderError
from vllm_operator.sim.catalog import Catalog
from vllm_operator.sim.engine.profiles import GIB, GpuProfile, ModelProfile
from vllm_operator.vllm import dtypes
from vllm_operator.vllm import flags as vf
from vllm_operator.vllm.env import ALLOW_LONG_MAX_MODEL_LEN, env_flag
from vllm_operator.vllm.values import Given, given_values

# extraArgs dests after which the checkpoint's config.json may not say what the model is
_CHECKPOINT_CHANGERS: Final = frozenset(
    {"quantization", "hf_overrides", "hf_config_path", "revision", "code_revision", "config_format"}
)


# extraArgs dests that change what a GPU holds of the weights
_WEIGHT_CHANGERS: Final = frozenset(
    {
        "quantization",
        "quantization_config",
        "load_format",
        "cpu_offload_gb",
        "cpu_offload_params",
        "offload_backend",
        "offload_group_size",
        "offload_num_in_group",
        "offload_params",
        "offload_prefetch_step",
    }
)


def check_model_start(spec: VLLMServiceSpec, profiles: Catalog) -> None:
    """Raise RenderError, naming the field to fix, where vLLM would refuse to start the spec's
    model on any of its acceptable GPU types."""
    engine = spec.engine or EngineSpec()
    given = given_values(engine.extra_args)
    known = _model(profiles, spec.model)
    model = None if _CHECKPOINT_CHANGERS & given.keys() else known
    if model is not None:
        _check_context(spec, engine, model)
        _check_heads(spec, model)
        if not _WEIGHT_CHANGERS & given.keys():
            _check_weights(spec, engine, "kv_cache_memory_bytes" in given, model, profiles)
    _check_dtypes(spec, engine, given, model, profiles)


def _check_weights(
    spec: VLLMServiceSpec,
    engine: EngineSpec,
    kv_bytes_given: bool,
    model: ModelProfile,
    profiles: Catalog,
) -> None:
    tp, pp = compute_parallel_sizes(spec)
    share = model.weight_bytes / (tp * pp)
    utilization = engine.gpu_memory_utilization
    if utilization is None:
        utilization = vf.DEFAULT_GPU_MEMORY_UTILIZATION
    for gpu_type in spec.gpu.acceptable_types:
        gpu = profiles.gpus.get(gpu_type)
        if gpu is None:
            continue
        usable = gpu.memory_bytes * (1.0 if kv_bytes_given else utilization)
        if share <= usable:
            continue
        limit = "all" if kv_bytes_given else f"{utilization:g} of"
        what = (
            f"{spec.model}'s weights take {share / GIB:.1f} GiB per GPU ({tp * pp} per replica), "
            f"more than vLLM 0.33 may use of one {gpu_type} ({limit} {gpu.memory_gib:g} GiB), "
            "so it cannot start"
        )
        if share < gpu.memory_bytes and not kv_bytes_given:
            least = math.ceil(share / gpu.memory_bytes * 100) / 100
            raise RenderError(
                "spec.engine.gpuMemoryUtilization",
                f"{what}; raise gpuMemoryUtilization above {least:g} (the KV cache needs room "
                "too) or use more GPUs per replica",
            )
        raise RenderError(
            "spec.gpu.count",
            f"{what}; use more GPUs per replica, a GPU type with more memory, or quantized weights",
        )


def _check_context(spec: VLLMServiceSpec, engine: EngineSpec, model: ModelProfile) -> None:
    asked = engine.max_model_len
    if asked is None or asked <= model.max_model_len:
        return
    allowing = [e for e in engine.env if e.name == ALLOW_LONG_MAX_MODEL_LEN]  # the last counts
    if allowing and (allowing[-1].value is None or env_flag(allowing[-1].value)):
        return  # allowed, or set from a Secret or ConfigMap: not known here
    raise RenderError(
        "spec.engine.maxModelLen",
        f"{asked} is above {spec.model}'s context length ({model.max_model_len}, its "
        "max_position_embeddings), which vLLM 0.33 refuses at start-up; lower maxModelLen, or "
        f"set {ALLOW_LONG_MAX_MODEL_LEN}=1 in spec.engine.env where the model handles more",
    )


def _check_heads(spec: VLLMServiceSpec, model: ModelProfile) -> None:
    tp, _ = compute_parallel_sizes(spec)
    if model.heads % tp == 0:
        return
    engine = spec.engine
    field = (
        "spec.engine.tensorParallelSize"
        if engine is not None and engine.tensor_parallel_size is not None
        else "spec.gpu.count"
    )
    fits = [d for d in range(1, model.heads + 1) if model.heads % d == 0 and d <= 8]
    raise RenderError(
        field,
        f"tensor parallel size {tp} does not divide {spec.model}'s {model.heads} attention "
        f"heads, which vLLM 0.33 refuses at start-up; use one of {', '.join(map(str, fits))}",
    )


def _check_dtypes(
    spec: VLLMServiceSpec,
    engine: EngineSpec,
    given: dict[str, Given],
    model: ModelProfile | None,
    profiles: Catalog,
) -> None:
    flag = given.get("dtype")
    if flag is not None and flag.value == "auto":
        flag = None
    if flag is None and model is None:
        return  # `auto`, on a checkpoint dtype not known here
    for gpu_type in spec.gpu.acceptable_types:
        gpu = profiles.gpus.get(gpu_type)
        if flag is None and gpu is None:
            continue  # `auto` depends on the GPU's compute capability
        capability = None if gpu is None else gpu.compute_capability
        checkpoint = "bfloat16" if model is None else model.dtype  # only read for `auto`
        runs_in = dtypes.resolve_model_dtype(
            "auto" if flag is None else flag.value, checkpoint, capability=capability
        )
        _check_kv(engine.kv_cache_dtype, runs_in, gpu_type, flag)
        if gpu is not None and flag is not None:
            _check_device(runs_in, gpu, flag)


def _model(profiles: Catalog, name: str) -> ModelProfile | None:
    try:
        return profiles.model(name)
    except KeyError:
        return None


def _check_kv(cache: str | None, runs_in: str, gpu_type: str, flag: Given | None) -> None:
    if cache is None:
        return
    try:
        dtypes.check_kv_cache_dtype(cache, runs_in)
    except ValueError:
        source = (
            "what --dtype auto picks for its checkpoint on this GPU"
            if flag is None
            else f"--dtype in {flags.extra_arg_field(flag.index)}"
        )
        allowed = f"auto or {runs_in}" if runs_in in dtypes.HALF_DTYPES else "auto"
        raise RenderError(
            "spec.engine.kvCacheDtype",
            f"{cache} is not the dtype the model runs in on {gpu_type} ({runs_in}, from "
            f"{source}), which vLLM 0.33 refuses at start-up; set kvCacheDtype to {allowed}",
        ) from None


def _check_device(runs_in: str, gpu: GpuProfile, flag: Given) -> None:
    try:
        dtypes.check_device_dtype(
            runs_in, capability=gpu.compute_capability, device_name=gpu.device_name
        )
    except ValueError:
        raise RenderError(
            flags.extra_arg_field(flag.index),
            f"--dtype {flag.value}: {gpu.name} (compute capability {gpu.compute_capability}) has "
            "no bfloat16, so vLLM 0.33 fails at start-up; use --dtype float16 or another GPU type",
        ) from None
