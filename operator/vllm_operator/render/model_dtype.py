"""The dtype the model runs in and the KV cache's, checked as vLLM 0.33 checks them at start-up.

vLLM refuses an explicit `--kv-cache-dtype float16` (or `bfloat16`) that is not the dtype the
model runs in, and a model in bfloat16 on a GPU below compute capability 8.0; where it checks
each is in vllm/dtypes.py, whose functions this module calls, so the rules live in one place.

The model runs in extraArgs' `--dtype`, or with `auto` in its checkpoint's dtype where the GPU
supports it. The renderer knows the checkpoint dtype and the compute capability only for the
models and GPU types the engine profiles describe (sim/profiles): a spec is refused only where
vLLM's refusal is certain, never on a guess. A model without a profile, a GPU type without one
(for `auto`), or extraArgs that can change what the checkpoint says (a quantization, another
revision or config) are checked only against an explicit `--dtype`.
"""

from __future__ import annotations

from typing import Final

from vllm_operator.api import flags
from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.render.errors import RenderError
from vllm_operator.sim.catalog import Catalog
from vllm_operator.sim.engine.profiles import GpuProfile, ModelProfile
from vllm_operator.vllm import dtypes
from vllm_operator.vllm.values import Given, given_values

# extraArgs dests after which the checkpoint's config.json may not say what the model runs in
_CHECKPOINT_CHANGERS: Final = frozenset(
    {"quantization", "hf_overrides", "hf_config_path", "revision", "code_revision", "config_format"}
)


def check_model_dtype(spec: VLLMServiceSpec, profiles: Catalog) -> None:
    """Raise RenderError, naming the field to fix, where vLLM would refuse the spec's model dtype
    or KV-cache dtype on any of its acceptable GPU types."""
    engine = spec.engine
    if engine is None:
        return
    given = given_values(engine.extra_args)
    flag = given.get("dtype")
    if flag is not None and flag.value == "auto":
        flag = None
    model = _model(profiles, spec.model)
    if flag is None and (model is None or _CHECKPOINT_CHANGERS & given.keys()):
        return  # `auto`, on a checkpoint dtype not known here
    for gpu_type in (spec.gpu.type, *spec.gpu.fallback_types):
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
        allowed = f"auto or {runs_in}" if runs_in in ("float16", "bfloat16") else "auto"
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
