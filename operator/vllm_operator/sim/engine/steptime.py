"""Step time: the roofline with BLIS's fitted corrections (docs/twin-calibration.md §2.3).

T_step = t0 + L*c_layer + B*c_req + roof(T_compute, T_memory) + T_tp

roof(c, m) = (c^(1/q) + m^(1/q))^q with q = `overlap` in [0, 1): q = 0 is the hard roofline
max(c, m); q > 0 lets a step near the crossover, where neither compute nor memory hides the
other, take longer than either alone (q = 1/2: hypot(c, m), 1.41 x at c = m).

T_compute = (2*P*n_prefill + attention FLOPs of prefill) / (F*mfu_prefill*TP)
          + (2*P*n_decode  + attention FLOPs of decode)  / (F*mfu_decode*TP)
T_memory  = W/(eta_w*BW*TP) + C*kv/(eta_kv*BW) + n*kv/BW        (kv = KV bytes/token per GPU)
            (eta_w, eta_kv, mfu_*: the GPU profile's own when it has them, else the coefficients;
            mfu_prefill of a GPU with a TDP: profiles.prefill_mfu)
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
    prefill_mfu,
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
        mfu_p = prefill_mfu(gpu, coeffs)
        mfu_d = gpu.mfu_decode if gpu.mfu_decode is not None else coeffs.mfu_decode
        self._lin_p = 2 * model.params_nonemb / (flops * mfu_p)
        self._lin_d = 2 * model.params_nonemb / (flops * mfu_d)
        attn = 2 * model.layers * model.heads * model.head_dim  # x n(2c+n+1) = attention FLOPs
        self._attn_p = attn / (flops * mfu_p)
        self._attn_d = attn / (flops * mfu_d)
        eta_w = gpu.eta_w if gpu.eta_w is not None else coeffs.eta_w
        self._weights = model.weight_bytes / (eta_w * bw * tp)
        eta_kv = gpu.eta_kv if gpu.eta_kv is not None else coeffs.eta_kv
        self._kv_read = kv_bytes_per_token / (eta_kv * bw)
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
        compute = (
            self._lin_p * prefill_tokens
            + self._attn_p * attn_prefill
            + self._lin_d * decode_tokens
            + self._attn_d * attn_decode
        )
        memory = self._weights + self._kv_read * ctx_tokens + self._kv_write * tokens
        comm = self._tp_fixed + self._tp_per_token * tokens if self._tp_fixed else 0.0
        return self._fixed + self._per_req * num_reqs + self._roof(compute, memory) + comm

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
        compute0 = self._lin_d * num_reqs
        memory0 = self._kv_write * num_reqs
        fixed = self._fixed + self._per_req * num_reqs
        comm = self._tp_fixed + self._tp_per_token * num_reqs if self._tp_fixed else 0.0
        attn, weights, kv_read, roof = self._attn_d, self._weights, self._kv_read, self._roof

        def step(ctx_tokens: int) -> float:
            compute = compute0 + attn * (2 * ctx_tokens)
            memory = weights + kv_read * ctx_tokens + memory0
            return fixed + roof(compute, memory) + comm

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
