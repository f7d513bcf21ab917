"""Step time: the roofline with BLIS's fitted corrections (docs/twin-calibration.md §2.3).

T_step = t0 + L*c_layer + B*c_req + roof(C_linear, M_weights) + roof(C_attn, M_kv) + T_tp

A step is two kinds of kernels run one after the other: the linear layers (weights streamed,
GEMM FLOPs) and attention (KV read and written, attention FLOPs). Each is bound by its own
compute or memory, and the two add: measured on the H200, a decode step took 0.98-1.05x the
sum of its linear layers and its attention timed alone (bench/results/gpu_probe_h200_overlap.json,
docs/twin-calibration.md §2.7). One roof over the sums would let the weights' stream hide the
attention's FLOPs and the KV read hide the GEMMs, which no kernel does.

roof(c, m) = (c^(1/q) + m^(1/q))^q with q = `overlap` in [0, 1): q = 0 is the hard roofline
max(c, m); q > 0 lets a kernel near the crossover, where neither compute nor memory hides the
other, take longer than either alone (q = 1/2: hypot(c, m), 1.41 x at c = m).

C_linear = 2*P*n_prefill / (F*mfu_prefill*TP) + 2*P*n_decode / (F*mfu_decode*TP)
C_attn   = attention FLOPs of prefill / (F*mfu_prefill*TP) + of decode / (F*mfu_decode*TP)
M_weights = W/(eta_w*BW*TP)
M_kv      = C*kv/(eta_kv*BW) + n*kv/BW        (kv = KV bytes/token per GPU)
            (eta_w, eta_kv, mfu_*: profiles.rates, the GPU's own where fitted)
T_tp      = tp_comm * 2*L * (latency + 2(TP-1)/TP * n*hidden*dtype / link)   when TP > 1

B = scheduled requests, n = scheduled tokens, C = KV tokens the step attends over (each
request's context up to and including its new tokens). A request scheduled for exactly one token
counts as decode, any larger chunk as prefill. Attention FLOPs for a chunk of n tokens on top of
c computed ones are 4*L*heads*head_dim * n*(c + (n+1)/2); the callers pass the integer
n*(2c + n + 1) so that the sums stay exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from vllm_operator.sim.engine.profiles import (
    GpuProfile,
    ModelProfile,
    StepCoefficients,
    rates,
)


class StepTimeModel:
    def __init__(
        self,
        gpu: GpuProfile,
        model: ModelProfile,
        *,
        tp: int,
        kv_bytes_per_token: int,
        coeffs: StepCoefficients,
    ) -> None:
        flops = gpu.tflops * 1e12 * tp
        bw = gpu.bandwidth_tbps * 1e12
        self._fixed = coeffs.t0 + model.layers * coeffs.c_layer
        self._per_req = coeffs.c_req
        own = rates(gpu, coeffs)
        self._lin_p = 2 * model.params_nonemb / (flops * own.mfu_prefill)
        self._lin_d = 2 * model.params_nonemb / (flops * own.mfu_decode)
        attn = 2 * model.layers * model.heads * model.head_dim  # x n(2c+n+1) = attention FLOPs
        self._attn_p = attn / (flops * own.mfu_prefill)
        self._attn_d = attn / (flops * own.mfu_decode)
        self._weights = model.weight_bytes / (own.eta_w * bw * tp)
        self._kv_read = kv_bytes_per_token / (own.eta_kv * bw)
        self._kv_write = kv_bytes_per_token / bw
        self._roof = _roof(coeffs.overlap)
        self._tp_fixed = 0.0
        self._tp_per_token = 0.0
        if tp > 1:
            ring = 2 * (tp - 1) / tp
            link = gpu.interconnect_gbps * 1e9
            reduces = 2 * model.layers  # attention output and MLP output of every layer
            self._tp_fixed = coeffs.tp_comm * reduces * gpu.allreduce_latency_us * 1e-6
            self._tp_per_token = (
                coeffs.tp_comm * reduces * ring * model.hidden * model.dtype_bytes / link
            )

    def duration(
        self,
        num_reqs: int,
        prefill_tokens: int,
        decode_tokens: int,
        ctx_tokens: int,
        attn_prefill: int,
        attn_decode: int,
    ) -> float:
        """Step time in seconds; attn_* are sums of n*(2c+n+1) over prefill/decode entries."""
        tokens = prefill_tokens + decode_tokens
        linear = self._lin_p * prefill_tokens + self._lin_d * decode_tokens
        attention = self._attn_p * attn_prefill + self._attn_d * attn_decode
        kv = self._kv_read * ctx_tokens + self._kv_write * tokens
        comm = self._tp_fixed + self._tp_per_token * tokens if self._tp_fixed else 0.0
        roof = self._roof
        return (
            self._fixed
            + self._per_req * num_reqs
            + roof(linear, self._weights)
            + roof(attention, kv)
            + comm
        )

    def decode_duration(self, num_reqs: int, ctx_tokens: int) -> float:
        """A step of `num_reqs` one-token decodes attending over `ctx_tokens` in total.

        Same value as `duration(num_reqs, 0, num_reqs, ctx_tokens, 0, 2*ctx_tokens)`, since a
        decode with context c+1 contributes 1*(2c+1+1) = 2(c+1) to the attention sum.
        """
        return self.decode_step(num_reqs)(ctx_tokens)

    def decode_step(self, num_reqs: int) -> Callable[[int], float]:
        """`decode_duration` with `num_reqs` fixed, for the cohort's fast loop.

        The arithmetic is `duration`'s, operand for operand (the zero prefill terms add exactly
        0.0), so both give bit-identical floats and the two engine paths stay comparable.
        """
        fixed = self._fixed + self._per_req * num_reqs
        roof = self._roof
        linear = roof(self._lin_d * num_reqs, self._weights)
        kv_write = self._kv_write * num_reqs
        comm = self._tp_fixed + self._tp_per_token * num_reqs if self._tp_fixed else 0.0
        attn, kv_read = self._attn_d, self._kv_read

        def step(ctx_tokens: int) -> float:
            attention = roof(attn * (2 * ctx_tokens), kv_read * ctx_tokens + kv_write)
            return fixed + linear + attention + comm

        return step


def _roof(overlap: float) -> Callable[[float, float], float]:
    if overlap <= 0:
        return max
    if overlap == 0.5:
        return math.hypot
    p = 1 / overlap

    def soft(compute: float, memory: float) -> float:
        return math.pow(math.pow(compute, p) + math.pow(memory, p), overlap)

    return soft


class ConstantStepTime:
    """Every step takes the same time: for hand-computable scenarios in tests and examples."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def duration(
        self,
        num_reqs: int,
        prefill_tokens: int,
        decode_tokens: int,
        ctx_tokens: int,
        attn_prefill: int,
        attn_decode: int,
    ) -> float:
        return self.seconds

    def decode_duration(self, num_reqs: int, ctx_tokens: int) -> float:
        return self.seconds

    def decode_step(self, num_reqs: int) -> Callable[[int], float]:
        return lambda _ctx: self.seconds


class StepTimer(Protocol):
    def duration(
        self,
        num_reqs: int,
        prefill_tokens: int,
        decode_tokens: int,
        ctx_tokens: int,
        attn_prefill: int,
        attn_decode: int,
    ) -> float: ...

    def decode_duration(self, num_reqs: int, ctx_tokens: int) -> float: ...

    def decode_step(self, num_reqs: int) -> Callable[[int], float]: ...
