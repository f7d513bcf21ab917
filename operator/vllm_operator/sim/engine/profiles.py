"""GPU and model profiles, and the fitted step-time coefficients, as plain data.

The values live in YAML (`sim/profiles/*.yaml`, loaded by `sim.catalog`); this module only
defines the shapes and turns a parsed mapping into a validated profile, so the engine stays free
of I/O. Sources for every number are in docs/twin-calibration.md §2 and the YAML comments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any

from vllm_operator.vllm.dtypes import HALF_DTYPES

GIB = 1024**3


@dataclass(frozen=True)
class GpuProfile:
    """One accelerator, as vLLM and the roofline model see it."""

    name: str  # catalog name, e.g. "H100-80GB"
    device_name: str  # what torch reports; vLLM's default table looks for "a100" in it
    memory_gib: float  # total device memory as torch reports it (vLLM's >= 70 / >= 160 GiB tiers)
    bandwidth_tbps: float  # HBM/GDDR bandwidth, TB/s
    tflops: float  # dense BF16/FP16 tensor TFLOPS
    interconnect_gbps: float  # per-GPU all-reduce bandwidth (NVLink / xGMI / PCIe), GB/s
    allreduce_latency_us: float  # fixed cost of one all-reduce (estimate, see gpus.yaml)
    # achieved fractions of peak compute in prefill and in decode; None (a GPU nothing was
    # measured on): `prefill_mfu` below, and StepCoefficients.mfu_decode (the fitted median)
    mfu_prefill: float | None = None
    mfu_decode: float | None = None
    # the board's power limit (datasheet TDP): what sustained tensor work is bounded by
    tdp_watts: float | None = None
    # achieved shares of bandwidth on this GPU when streaming weights and when reading KV in
    # attention (fitted by `vllm-twin calibrate`); None: StepCoefficients.eta_w / eta_kv
    eta_w: float | None = None
    eta_kv: float | None = None
    # CUDA compute capability as torch reports it ("8.9"); below 8.0 there is no bfloat16, so
    # vLLM runs a BF16 checkpoint in float16 (vllm_operator.vllm.dtypes); None: not known
    compute_capability: str | None = None

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * GIB)


@dataclass(frozen=True)
class ModelProfile:
    """A dense decoder-only model with full attention (the scope of docs/vllm-0.33-scheduler.md)."""

    name: str
    params: float  # total parameters
    params_nonemb: float  # parameters multiplied per token (input embedding lookup excluded)
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    dtype_bytes: int  # weight dtype (2 for BF16)
    weight_bytes: int
    kv_bytes_per_token: int  # at the model dtype, all layers, K and V
    max_model_len: int  # vLLM's derived maximum (max_position_embeddings)
    activation_gib: float  # vLLM's profiled activation peak (llm-d-planner constants)
    aliases: tuple[str, ...] = ()  # HF ids that mean this profile
    dtype: str = "bfloat16"  # the checkpoint's dtype (config.json torch_dtype)

    def kv_bytes_per_token_at(self, kv_dtype_bytes: int) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * kv_dtype_bytes


@dataclass(frozen=True)
class StepCoefficients:
    """Fitted corrections to the roofline (docs/twin-calibration.md §2.3: BLIS's defaults)."""

    t0: float = 126e-6  # s per step
    c_layer: float = 32.1e-6  # s per layer per step
    c_req: float = 4.42e-6  # s per scheduled request per step
    eta_w: float = 1 / 1.3625  # weight-streaming bandwidth fraction
    eta_kv: float = 1 / 1.947  # KV-read bandwidth fraction
    # compute efficiencies of a GPU without its own (BLIS's H100 values; calibrate writes the
    # median of the fitted GPUs', docs/twin-calibration.md §2.5)
    mfu_prefill: float = 0.45
    mfu_decode: float = 0.30
    tp_comm: float = 0.752  # all-reduce correction (BLIS beta4)
    overlap: float = 0.0  # 0: hard max(compute, memory); > 0: a smooth roofline (steptime.py)
    # prefill TFLOPS a watt of board power sustains, and the best mfu_prefill measured on any GPU:
    # a GPU with a TDP but no mfu_prefill of its own gets min(max, per_watt * TDP / peak); 0:
    # mfu_prefill above (docs/twin-calibration.md §2.5)
    prefill_tflops_per_watt: float = 0.0
    mfu_prefill_max: float = 1.0
    api_overhead: float = 15.6e-3  # alpha0: HTTP parse/validate/enqueue, delays engine arrival
    api_request_cost: float = 0.0  # API server CPU per request, serial: a burst queues on it
    api_chat_cost: float = 0.0  # extra API CPU of a chat request (template, messages), serial
    finish_overhead: float = 0.78e-3  # alpha1: post-decode finish processing, added to E2E
    output_delay: float = 45.9e-6  # alpha2: per streamed output (detokenise, send)
    nontorch_gib_tp1: float = 0.27  # non-torch memory at TP=1 (llm-d-planner)
    nontorch_gib_tp: float = 2.1  # ... at TP>1 (NCCL buffers)
    step_noise: float = 0.0  # relative std of step-time noise; 0 = deterministic model


def prefill_mfu(gpu: GpuProfile, coeffs: StepCoefficients) -> float:
    """The share of `gpu`'s peak compute a prefill achieves: its own where measured, else what
    its power limit sustains (at most the best measured share), else the coefficients'."""
    if gpu.mfu_prefill is not None:
        return gpu.mfu_prefill
    if gpu.tdp_watts is not None and coeffs.prefill_tflops_per_watt > 0:
        sustained = coeffs.prefill_tflops_per_watt * gpu.tdp_watts / gpu.tflops
        return min(coeffs.mfu_prefill_max, sustained)
    return coeffs.mfu_prefill


@dataclass(frozen=True)
class Rates:
    """The achieved shares a step on one GPU runs at: the GPU's own where fitted, else the
    coefficients' (one place for the fallback, used by the step-time model and the kernel
    check alike)."""

    mfu_prefill: float
    mfu_decode: float
    eta_w: float
    eta_kv: float


def rates(gpu: GpuProfile, coeffs: StepCoefficients) -> Rates:
    return Rates(
        mfu_prefill=prefill_mfu(gpu, coeffs),
        mfu_decode=gpu.mfu_decode if gpu.mfu_decode is not None else coeffs.mfu_decode,
        eta_w=gpu.eta_w if gpu.eta_w is not None else coeffs.eta_w,
        eta_kv=gpu.eta_kv if gpu.eta_kv is not None else coeffs.eta_kv,
    )


class ProfileError(ValueError):
    """A profile mapping is malformed; the message names the entry and the field."""


def _build(cls: type[Any], name: str, raw: Mapping[str, Any], kind: str) -> Any:
    if not isinstance(raw, Mapping):
        raise ProfileError(f"{kind} {name!r}: expected a mapping, got {type(raw).__name__}")
    known = {f.name for f in fields(cls)} - {"name"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ProfileError(f"{kind} {name!r}: unknown field(s) {', '.join(unknown)}")
    values: dict[str, Any] = {"name": name}
    for f in fields(cls):
        if f.name == "name":
            continue
        if f.name not in raw:
            if f.default is not MISSING or f.default_factory is not MISSING:
                continue
            raise ProfileError(f"{kind} {name!r}: missing field {f.name}")
        values[f.name] = raw[f.name]
    return cls(**values)


def _positive(kind: str, name: str, obj: object, names: tuple[str, ...]) -> None:
    for field_name in names:
        value = getattr(obj, field_name)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ProfileError(f"{kind} {name!r}: {field_name} must be a positive number")


_DTYPE_BYTES = dict.fromkeys(HALF_DTYPES, 2)  # 16-bit checkpoints: what the step times are
_CAPABILITY = re.compile(r"[0-9]{1,2}\.[0-9]")


def gpu_from_mapping(name: str, raw: Mapping[str, Any]) -> GpuProfile:
    gpu: GpuProfile = _build(GpuProfile, name, raw, "gpu")
    capability = gpu.compute_capability
    if capability is not None and not (
        isinstance(capability, str) and _CAPABILITY.fullmatch(capability)
    ):
        raise ProfileError(
            f'gpu {name!r}: compute_capability is MAJOR.MINOR in quotes, e.g. "8.9"; '
            f"got {capability!r}"
        )
    _positive("gpu", name, gpu, ("memory_gib", "bandwidth_tbps", "tflops"))
    _positive("gpu", name, gpu, ("interconnect_gbps", "allreduce_latency_us"))
    if gpu.tdp_watts is not None:
        _positive("gpu", name, gpu, ("tdp_watts",))
    for field_name, what in (
        ("mfu_prefill", "peak"),
        ("mfu_decode", "peak"),
        ("eta_w", "bandwidth"),
        ("eta_kv", "bandwidth"),
    ):
        value = getattr(gpu, field_name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1
        ):
            raise ProfileError(
                f"gpu {name!r}: {field_name} is a fraction of {what} (0 < {field_name} <= 1)"
            )
    return gpu


def model_from_mapping(name: str, raw: Mapping[str, Any]) -> ModelProfile:
    data = dict(raw)
    data["aliases"] = tuple(data.get("aliases", ()))
    model: ModelProfile = _build(ModelProfile, name, data, "model")
    _positive(
        "model",
        name,
        model,
        ("params", "params_nonemb", "layers", "hidden", "heads", "kv_heads", "head_dim"),
    )
    _positive(
        "model", name, model, ("dtype_bytes", "weight_bytes", "max_model_len", "activation_gib")
    )
    if _DTYPE_BYTES.get(model.dtype) != model.dtype_bytes:
        raise ProfileError(
            f"model {name!r}: dtype must be one of {', '.join(_DTYPE_BYTES)} and match "
            f"dtype_bytes ({model.dtype!r} with dtype_bytes {model.dtype_bytes})"
        )
    derived = model.kv_bytes_per_token_at(model.dtype_bytes)
    # the YAML states kv_bytes_per_token for readers; a typo in either place must not pass
    if model.kv_bytes_per_token != derived:
        raise ProfileError(
            f"model {name!r}: kv_bytes_per_token {model.kv_bytes_per_token} does not match "
            f"2*layers*kv_heads*head_dim*dtype_bytes = {derived}"
        )
    return model
