"""Kernel figures measured here against what a GPU profile assumes (issue 12, item 6).

bench/device/gpu_probe.py times, on a lent GPU, the kernels of a decode or prefill step of
Llama-3.1-8B: its linear layers at M tokens, one-token attention over a KV cache, causal prefill
attention, the output projection. They are GPU time only (no norms, rotary, sampling, scheduler
or HTTP server), so:

- a profile that assumes more than them (`overreach`) is wrong: its weight stream faster than
  the linear layers at one token, its KV reads faster than the best attention, its prefill or
  decode matrix rate higher than the linear layers' best;
- the step-time model's GPU terms (steptime.py without t0, c_layer and c_req) should sit at or
  above the kernels' sum for the same step (`step_parity`): below means the twin's step is faster
  than the chip's bare kernels.

Pure functions of the probe's JSON (`runs`, each run one gpu_probe.json) and the catalog.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vllm_operator.sim.engine import GpuProfile, StepCoefficients
from vllm_operator.sim.engine.profiles import ModelProfile, rates
from vllm_operator.sim.engine.steptime import StepTimeModel
from vllm_twin.calibration.measurements import KernelCeilings

Run = Mapping[str, Any]
# the probe's linear layers count as "prefill-sized" from this many tokens per step
PREFILL_TOKENS = 2048
LARGE_BATCH = 64


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values)


def ceilings_from_probe(runs: Sequence[Run]) -> dict[str, float]:
    """Each ceiling as the mean over runs of that run's figure, rounded as the YAML keeps it."""

    def per_run(figure: Any) -> float:
        return round(_mean([float(figure(run)) for run in runs]), 3)

    def gemm(run: Run) -> Sequence[Mapping[str, Any]]:
        return list(run["gemm_stack"]["rows"])

    def decode(run: Run) -> Sequence[Mapping[str, Any]]:
        return list(run["attn_decode"]["rows"])

    return {
        "copy_tbps": per_run(lambda r: r["ceilings"]["copy_tbps"]),
        "read_tbps": per_run(lambda r: r["ceilings"]["read_tbps"]),
        "weight_stream_tbps": per_run(
            lambda r: next(x["weight_tbps"] for x in gemm(r) if x["tokens"] == 1)
        ),
        "gemm_tflops": per_run(
            lambda r: max(x["tflops"] for x in gemm(r) if x["tokens"] >= PREFILL_TOKENS)
        ),
        "kv_read_tbps": per_run(lambda r: max(x["kv_tbps"] for x in decode(r))),
        "kv_read_tbps_large_batch": per_run(
            lambda r: statistics.median(
                x["kv_tbps"] for x in decode(r) if x["batch"] >= LARGE_BATCH
            )
        ),
        "attn_prefill_tflops": per_run(
            lambda r: max(x["tflops"] for x in r["attn_prefill"]["rows"])
        ),
    }


@dataclass(frozen=True)
class Rate:
    what: str  # the rate and the profile fields it comes from
    assumed: float  # what the profile assumes
    measured: float  # what the kernels reached
    unit: str
    bound: bool = True  # False: shown beside, not a ceiling the profile must stay under


def assumed_rates(
    ceilings: KernelCeilings, gpu: GpuProfile, coeffs: StepCoefficients
) -> list[Rate]:
    """Each rate the step-time model assumes for `gpu`, beside what its kernels reached."""
    bandwidth, peak = gpu.bandwidth_tbps, gpu.tflops
    own = rates(gpu, coeffs)
    kv = own.eta_kv * bandwidth
    return [
        Rate("eta_w x bandwidth", own.eta_w * bandwidth, ceilings.weight_stream_tbps, "TB/s"),
        Rate("eta_kv x bandwidth", kv, ceilings.kv_read_tbps, "TB/s"),
        Rate("eta_kv x bandwidth, batch >= 64", kv, ceilings.kv_read_tbps_large_batch, "TB/s",
             bound=False),
        Rate("mfu_prefill x tflops", own.mfu_prefill * peak, ceilings.gemm_tflops, "TFLOP/s"),
        Rate("mfu_decode x tflops", own.mfu_decode * peak, ceilings.gemm_tflops, "TFLOP/s"),
    ]  # fmt: skip


def overreach(ceilings: KernelCeilings, gpu: GpuProfile, coeffs: StepCoefficients) -> list[str]:
    """One line per rate the profile assumes beyond what the GPU's kernels achieved."""
    return [
        f"{gpu.name}: {r.what} = {r.assumed:.3g} {r.unit}, over the {r.measured:.3g} {r.unit}"
        " measured here"
        for r in assumed_rates(ceilings, gpu, coeffs)
        if r.bound and r.assumed > r.measured
    ]


@dataclass(frozen=True)
class ParityRow:
    kind: str  # "decode" (batch one-token steps) or "prefill" (one prompt from empty)
    batch: int
    context: int  # tokens each request attends over (decode) or the prompt length (prefill)
    kernels_ms: float  # linear layers + output projection + every layer's attention
    twin_ms: float  # the step-time model's GPU terms for the same step

    @property
    def ratio(self) -> float:
        return self.twin_ms / self.kernels_ms


def _by(runs: Sequence[Run], section: str, keys: tuple[str, ...], value: str) -> dict[Any, float]:
    """{key tuple or key: mean over runs of `value`} for one section's rows."""
    seen: dict[Any, list[float]] = {}
    for run in runs:
        for row in run[section]["rows"]:
            key = tuple(row[k] for k in keys)
            seen.setdefault(key if len(key) > 1 else key[0], []).append(float(row[value]))
    return {key: _mean(values) for key, values in seen.items()}


def step_parity(
    runs: Sequence[Run], gpu: GpuProfile, model: ModelProfile, coeffs: StepCoefficients
) -> list[ParityRow]:
    """The twin's GPU terms against the kernels' sum, for every step the probe can compose."""
    gpu_only = dataclasses.replace(coeffs, t0=0.0, c_layer=0.0, c_req=0.0)
    twin = StepTimeModel(
        gpu, model, tp=1, kv_bytes_per_token=model.kv_bytes_per_token, coeffs=gpu_only
    )
    linear = _by(runs, "gemm_stack", ("tokens",), "ms")
    head = _by(runs, "lm_head", ("rows",), "ms")
    decode = _by(runs, "attn_decode", ("batch", "context"), "us_per_layer")
    prefill = _by(runs, "attn_prefill", ("length",), "us_per_layer")
    rows = []

    def head_of(batch: int) -> float | None:
        # the output projection is flat up to 128 rows (weight-bound): a batch the probe did not
        # time takes the next larger row count's time, an upper estimate
        larger = [rows_ for rows_ in head if rows_ >= batch]
        return head[min(larger)] if larger else None

    for (batch, ctx), us in sorted(decode.items()):
        projection = head_of(batch)
        if batch in linear and projection is not None:
            kernels = linear[batch] + projection + model.layers * us / 1e3
            ms = twin.decode_duration(batch, batch * ctx) * 1e3
            rows.append(ParityRow("decode", batch, ctx, kernels, ms))
    for length, us in sorted(prefill.items()):
        projection = head_of(1)  # one sampled token per prompt
        if length in linear and projection is not None:
            kernels = linear[length] + projection + model.layers * us / 1e3
            ms = twin.duration(1, length, 0, length, length * (length + 1), 0) * 1e3
            rows.append(ParityRow("prefill", 1, length, kernels, ms))
    return rows


@dataclass(frozen=True)
class OverlapRow:
    """One decode step's linear layers and attention, alone and interleaved (probe's
    step_overlap): `step` near `linear + attention` means they add, near the larger that one
    hides the other."""

    batch: int
    context: int
    linear_ms: float
    attention_ms: float
    step_ms: float

    @property
    def over_sum(self) -> float:
        return self.step_ms / (self.linear_ms + self.attention_ms)

    @property
    def over_max(self) -> float:
        return self.step_ms / max(self.linear_ms, self.attention_ms)


def step_overlap(runs: Sequence[Run]) -> list[OverlapRow]:
    """Each shape's times as the mean over runs."""
    parts = [_by(runs, "step_overlap", ("batch", "context"), f"{k}_ms")
             for k in ("linear", "attention", "step")]  # fmt: skip
    return [
        OverlapRow(batch, ctx, parts[0][(batch, ctx)], parts[1][(batch, ctx)], step)
        for (batch, ctx), step in sorted(parts[2].items())
    ]
