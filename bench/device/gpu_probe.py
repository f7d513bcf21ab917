"""What the twin's GPU profile assumes, measured on the GPU itself with PyTorch (issue 12, item 6).

Run on a machine with a CUDA GPU (the device tool's H200 here):

    python3 bench/device/gpu_probe.py --out DIR

It writes DIR/gpu_probe.json and prints a table per section. Everything is GPU time from CUDA
events, kernels only: no vLLM, no HTTP server, no scheduler, so these figures bound what the
step-time model's GPU terms may assume (operator/vllm_operator/sim/engine/steptime.py), they do
not replace the serving measurements. Sections:

- ceilings: a device-to-device copy (bytes read + written), a read-only reduction, and an
  8192^3 bf16 matrix product;
- gemm_stack: the linear layers of Llama-3.1-8B (32 layers of qkv, o, gate_up, down; bf16, the
  weights distinct per layer so nothing stays in L2) at M tokens per step, captured in a CUDA
  graph as vLLM captures its decode steps: achieved weight bandwidth at small M (the profile's
  eta_w x bandwidth) and achieved matrix rate at large M (mfu_prefill and mfu_decode x tflops);
- lm_head: the 128256-wide output projection at one row per sequence;
- attn_decode: one-token queries over a KV cache (32 query heads, 8 KV heads, head_dim 128, GQA)
  at batch x context sizes, one layer per call over distinct layers' caches: achieved KV read
  bandwidth (the profile's eta_kv x bandwidth). PyTorch's scaled_dot_product_attention, not
  vLLM's paged FlashAttention kernels: a lower bound at small batch, where it has few blocks;
- attn_prefill: causal attention over a whole prompt: achieved attention FLOP rate;
- step_overlap: decode steps of the 32 layers with their linear layers and attention
  interleaved as a model runs them, against the linear layers alone plus the attention alone:
  whether one hides the other (a step-wide roofline) or they add (a roofline per kernel class).

torch is imported inside main() so that the repository's lint and tests never need it.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

# Llama-3.1-8B (config.json of meta-llama/Llama-3.1-8B-Instruct)
HIDDEN, INTER, LAYERS, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 4096, 14336, 32, 32, 8, 128, 128256
QKV = (HEADS + 2 * KV_HEADS) * HEAD_DIM  # 6144
GEMM_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 192, 256, 384, 512, 1024, 2048, 4096, 8192)
LM_HEAD_ROWS = (1, 8, 32, 64, 128, 256)
DECODE_SHAPES = [(b, c) for b in (1, 4, 16, 64, 128, 256) for c in (1024, 4096, 16384)]
DECODE_MAX_TOKENS = 2**22  # batch x context per layer (16 GiB of K and V)
PREFILL_LENGTHS = (512, 2048, 8192, 16384)
STEP_SHAPES = (
    (1, 4096),
    (16, 16384),
    (64, 1024),
    (64, 4096),
    (128, 2048),
    (256, 1024),
    (256, 4096),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for gpu_probe.json")
    parser.add_argument("--quick", action="store_true", help="fewer sizes (a smoke run)")
    parser.add_argument("--only", help="comma-separated sections to run (default: all)")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu_probe: no CUDA device; this script measures a GPU", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    result: dict[str, Any] = {
        "device": {
            "name": props.name,
            "memory_gib": round(props.total_memory / 2**30, 1),
            "multiprocessors": props.multi_processor_count,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
        },
        "model": "Llama-3.1-8B shapes, bf16",
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(f"gpu_probe: {props.name}, torch {torch.__version__}", flush=True)
    quick = args.quick
    sections = [
        ("ceilings", lambda: ceilings(torch)),
        ("gemm_stack", lambda: gemm_stack(torch, GEMM_TOKENS[::3] if quick else GEMM_TOKENS)),
        ("lm_head", lambda: lm_head(torch, LM_HEAD_ROWS)),
        ("attn_decode", lambda: attn_decode(torch, DECODE_SHAPES[:4] if quick else DECODE_SHAPES)),
        ("attn_prefill", lambda: attn_prefill(torch, PREFILL_LENGTHS)),
        ("step_overlap", lambda: step_overlap(torch, STEP_SHAPES[:2] if quick else STEP_SHAPES)),
    ]
    only = set(args.only.split(",")) if args.only else None
    for name, run in sections:
        if only is not None and name not in only:
            continue
        started = time.monotonic()
        print(f"== {name}", flush=True)
        try:
            result[name] = run()
        except Exception as exc:  # one section's failure must not lose the others' figures
            traceback.print_exc()
            result[name] = {"error": f"{type(exc).__name__}: {exc}"}
        torch.cuda.empty_cache()
        print(f"   ({time.monotonic() - started:.1f} s)", flush=True)
        (args.out / "gpu_probe.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


def timed(torch: Any, fn: Any, *, reps: int = 10, warmup: int = 3) -> float:
    """Median seconds of `fn()` by CUDA events, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def graphed(torch: Any, body: Any) -> Any:
    """`body` captured once in a CUDA graph; the returned function replays it."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            body()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    return graph.replay


def ceilings(torch: Any) -> dict[str, Any]:
    n = 2**31  # 4 GiB of bf16
    a = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    b = torch.empty_like(a)
    copy_s = timed(torch, lambda: b.copy_(a))
    read_s = timed(torch, lambda: a.sum(dtype=torch.float32))
    size = 8192
    x = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    mm_s = timed(torch, lambda: x @ y)
    out = {
        "copy_tbps": round(2 * n * 2 / copy_s / 1e12, 3),
        "read_tbps": round(n * 2 / read_s / 1e12, 3),
        "gemm_8192_tflops": round(2 * size**3 / mm_s / 1e12, 1),
    }
    print(f"   copy {out['copy_tbps']} TB/s (read+write), read {out['read_tbps']} TB/s, "
          f"bf16 8192^3 {out['gemm_8192_tflops']} TFLOP/s", flush=True)  # fmt: skip
    return out


def gemm_stack(torch: Any, tokens: tuple[int, ...]) -> dict[str, Any]:
    def weight(rows: int, cols: int) -> Any:
        return torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16) * 0.02

    shapes = ((QKV, HIDDEN), (HIDDEN, HIDDEN), (2 * INTER, HIDDEN), (HIDDEN, INTER))
    layers = [[weight(*shape) for shape in shapes] for _ in range(LAYERS)]
    params = LAYERS * (QKV * HIDDEN + HIDDEN * HIDDEN + 2 * INTER * HIDDEN + HIDDEN * INTER)
    weight_bytes = 2 * params
    rows = []
    for m in tokens:
        x = torch.randn(m, HIDDEN, device="cuda", dtype=torch.bfloat16)
        h = torch.randn(m, INTER, device="cuda", dtype=torch.bfloat16)

        def body(x: Any = x, h: Any = h) -> None:
            for w_qkv, w_o, w_gu, w_d in layers:
                torch.matmul(x, w_qkv.t())
                torch.matmul(x, w_o.t())
                torch.matmul(x, w_gu.t())
                torch.matmul(h, w_d.t())

        seconds = timed(torch, graphed(torch, body), reps=5 if m >= 2048 else 10)
        flops = 2 * params * m
        row = {
            "tokens": m,
            "ms": round(seconds * 1e3, 4),
            "weight_tbps": round(weight_bytes / seconds / 1e12, 3),
            "tflops": round(flops / seconds / 1e12, 1),
        }
        rows.append(row)
        print(f"   M={m:5d}  {row['ms']:9.3f} ms  {row['weight_tbps']:6.3f} TB/s of weights  "
              f"{row['tflops']:6.1f} TFLOP/s", flush=True)  # fmt: skip
    return {"params": params, "weight_bytes": weight_bytes, "rows": rows}


def lm_head(torch: Any, rows_: tuple[int, ...]) -> dict[str, Any]:
    w = torch.randn(VOCAB, HIDDEN, device="cuda", dtype=torch.bfloat16) * 0.02
    rows = []
    for m in rows_:
        x = torch.randn(m, HIDDEN, device="cuda", dtype=torch.bfloat16)
        seconds = timed(torch, graphed(torch, lambda x=x: torch.matmul(x, w.t())))
        rows.append({"rows": m, "ms": round(seconds * 1e3, 4),
                     "weight_tbps": round(2 * VOCAB * HIDDEN / seconds / 1e12, 3)})  # fmt: skip
        last = rows[-1]
        print(f"   rows={m:4d}  {last['ms']:.4f} ms  {last['weight_tbps']} TB/s", flush=True)
    return {"rows": rows}


def _sdpa(torch: Any, q: Any, k: Any, v: Any, causal: bool) -> tuple[str, int, Any]:
    """The first fused SDPA backend that runs GQA here (flash, efficient, cuDNN), how many times
    the KV heads it reads were repeated (1; 4 when no backend takes GQA and the cache is expanded
    to one KV head per query head), and a call."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    backends = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                SDPBackend.CUDNN_ATTENTION)  # fmt: skip
    for backend in backends:

        def call(backend: Any = backend) -> Any:
            with sdpa_kernel(backend):
                return sdpa(q, k, v, is_causal=causal, enable_gqa=True)

        try:
            call()
            torch.cuda.synchronize()
            return backend.name, 1, call
        except RuntimeError:
            continue
    repeat = HEADS // KV_HEADS
    k2, v2 = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)

    def expanded() -> Any:
        with sdpa_kernel(list(backends)):
            return sdpa(q, k2, v2, is_causal=causal)

    expanded()
    return "expanded-kv", repeat, expanded


def attn_decode(torch: Any, shapes: list[tuple[int, int]]) -> dict[str, Any]:
    rows = []
    for batch, ctx in shapes:
        tokens = batch * ctx
        if tokens > DECODE_MAX_TOKENS:
            continue
        # enough layers' caches that one pass reads >= 1 GiB: no layer is served from L2
        kv_bytes = 2 * tokens * KV_HEADS * HEAD_DIM * 2
        layers = max(1, min(LAYERS, math.ceil(2**30 / kv_bytes)))
        q = torch.randn(batch, HEADS, 1, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
        caches = [
            (torch.randn(batch, KV_HEADS, ctx, HEAD_DIM, device="cuda", dtype=torch.bfloat16),
             torch.randn(batch, KV_HEADS, ctx, HEAD_DIM, device="cuda", dtype=torch.bfloat16))
            for _ in range(layers)
        ]  # fmt: skip
        backend, repeat, _ = _sdpa(torch, q, *caches[0], causal=False)
        calls = [_sdpa(torch, q, k, v, causal=False)[2] for k, v in caches]

        def body(calls: list[Any] = calls) -> None:
            for call in calls:
                call()

        per_layer = timed(torch, graphed(torch, body)) / layers
        row = {
            "batch": batch,
            "context": ctx,
            "backend": backend,
            "layers_timed": layers,
            "us_per_layer": round(per_layer * 1e6, 2),
            "kv_tbps": round(repeat * kv_bytes / per_layer / 1e12, 3),
        }
        rows.append(row)
        print(f"   B={batch:4d} C={ctx:6d}  {row['us_per_layer']:9.2f} us/layer  "
              f"{row['kv_tbps']:6.3f} TB/s of KV  ({backend})", flush=True)  # fmt: skip
        del caches, calls
        torch.cuda.empty_cache()
    return {"rows": rows}


def attn_prefill(torch: Any, lengths: tuple[int, ...]) -> dict[str, Any]:
    rows = []
    for n in lengths:
        q = torch.randn(1, HEADS, n, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(1, KV_HEADS, n, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(1, KV_HEADS, n, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
        backend, _, call = _sdpa(torch, q, k, v, causal=True)
        seconds = timed(torch, call)
        flops = 4 * HEADS * HEAD_DIM * n * (n + 1) / 2  # causal: QK^T and PV over the lower half
        row = {"length": n, "backend": backend, "us_per_layer": round(seconds * 1e6, 2),
               "tflops": round(flops / seconds / 1e12, 1)}  # fmt: skip
        rows.append(row)
        print(f"   N={n:6d}  {row['us_per_layer']:10.2f} us/layer  {row['tflops']:6.1f} TFLOP/s "
              f"({backend})", flush=True)  # fmt: skip
    return {"rows": rows}


def step_overlap(torch: Any, shapes: tuple[tuple[int, int], ...]) -> dict[str, Any]:
    def weight(rows: int, cols: int) -> Any:
        return torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16) * 0.02

    shapes_ = ((QKV, HIDDEN), (HIDDEN, HIDDEN), (2 * INTER, HIDDEN), (HIDDEN, INTER))
    layers = [[weight(*shape) for shape in shapes_] for _ in range(LAYERS)]
    rows = []
    for batch, ctx in shapes:
        row = _step_row(torch, layers, batch, ctx)
        rows.append(row)
        print(f"   B={batch:4d} C={ctx:6d}  linear {row['linear_ms']:8.3f}  attention "
              f"{row['attention_ms']:8.3f}  step {row['step_ms']:8.3f} ms  step/sum "
              f"{row['step_over_sum']:.3f}  step/max {row['step_over_max']:.3f}",
              flush=True)  # fmt: skip
        torch.cuda.empty_cache()
    return {"rows": rows}


def _step_row(torch: Any, layers: list[list[Any]], batch: int, ctx: int) -> dict[str, Any]:
    """One decode step's linear layers alone, attention alone, and both interleaved."""
    kv_bytes = 2 * batch * ctx * KV_HEADS * HEAD_DIM * 2
    distinct = max(1, min(LAYERS, math.ceil(2**30 / kv_bytes)))  # > L2 whichever is read
    caches = [
        (torch.randn(batch, KV_HEADS, ctx, HEAD_DIM, device="cuda", dtype=torch.bfloat16),
         torch.randn(batch, KV_HEADS, ctx, HEAD_DIM, device="cuda", dtype=torch.bfloat16))
        for _ in range(distinct)
    ]  # fmt: skip
    x = torch.randn(batch, HIDDEN, device="cuda", dtype=torch.bfloat16)
    h = torch.randn(batch, INTER, device="cuda", dtype=torch.bfloat16)
    q = torch.randn(batch, HEADS, 1, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    calls = [_sdpa(torch, q, k, v, causal=False)[2] for k, v in caches]

    def body(with_linear: bool, with_attention: bool) -> Any:
        def run() -> None:
            for n in range(LAYERS):
                w_qkv, w_o, w_gu, w_d = layers[n]
                if with_linear:
                    torch.matmul(x, w_qkv.t())
                if with_attention:
                    calls[n % distinct]()
                if with_linear:
                    torch.matmul(x, w_o.t())
                    torch.matmul(x, w_gu.t())
                    torch.matmul(h, w_d.t())

        return run

    linear = timed(torch, graphed(torch, body(True, False)))
    attention = timed(torch, graphed(torch, body(False, True)))
    step = timed(torch, graphed(torch, body(True, True)))
    return {
        "batch": batch,
        "context": ctx,
        "linear_ms": round(linear * 1e3, 4),
        "attention_ms": round(attention * 1e3, 4),
        "step_ms": round(step * 1e3, 4),
        "step_over_sum": round(step / (linear + attention), 4),
        "step_over_max": round(step / max(linear, attention), 4),
    }


if __name__ == "__main__":
    sys.exit(main())
