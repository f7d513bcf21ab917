"""The twin's GPU step terms beside the kernels measured here on that GPU.

    .venv/bin/python bench/kernel_parity.py [--kernels ID] [--out DIR]

For the measurement set's `kernels` entry (twin/calibration/measurements.yaml; the first one
unless --kernels names another), reads the probe's runs from its `raw` file and writes
kernel_parity_<gpu>.json, .md (the ceilings against what the profile assumes; every step the probe
composes, with the kernels' sum and the step-time model's GPU terms) and .png (the ratio against
batch). A figure, not a test: nothing here passes or fails. vllm_twin.calibration.kernels says
what is compared and why a ratio under 1 is the finding to read.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vllm_operator.sim.catalog import load_catalog
from vllm_twin.calibration.kernels import (
    OverlapRow,
    ParityRow,
    Rate,
    assumed_rates,
    overreach,
    step_overlap,
    step_parity,
)
from vllm_twin.calibration.measurements import KernelSource, load_measurements

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
MODEL = "Llama-3.1-8B"  # the shapes bench/device/gpu_probe.py times


def render_markdown(
    kernels: KernelSource,
    rates: Sequence[Rate],
    rows: Sequence[ParityRow],
    problems: list[str],
    overlap: Sequence[OverlapRow] = (),
) -> str:
    ratios = [r.ratio for r in rows]
    lines = [
        f"# The twin's {kernels.gpu_profile} step terms beside its kernels, measured here",
        "",
        f"Kernels: `{kernels.id}` ({kernels.device}; {kernels.runs} runs of `{kernels.script}`,"
        f" raw figures in `{kernels.raw}`). Twin: the shipped catalog's step-time model for"
        f" {MODEL} without t0, c_layer and c_req (its GPU terms only).",
        "Regenerate: `.venv/bin/python bench/kernel_parity.py`.",
        "",
        "## What the profile assumes against what the kernels achieved",
        "",
        "| rate | profile assumes | kernels measured | assumed / measured |",
        "|---|---:|---:|---:|",
    ]
    for r in rates:
        lines.append(
            f"| {r.what} | {r.assumed:.3g} {r.unit} | {r.measured:.4g} {r.unit} |"
            f" {r.assumed / r.measured:.2f} |"
        )
    lines += [
        "",
        "Over 1.00 on a ceiling would be a profile faster than the chip (the batch >= 64 row is"
        " shown beside, not a ceiling): " + ("none." if not problems else "; ".join(problems)),
        "",
        "## Steps: the kernels' sum against the twin's GPU terms",
        "",
        f"Twin / kernels: median {statistics.median(ratios):.2f}, range {min(ratios):.2f} to"
        f" {max(ratios):.2f} over {len(rows)} steps. The kernels leave out norms, rotary,"
        " activation and sampling, so a faithful twin sits at or a little above 1.00; under 1.00"
        " its step is faster than the bare kernels.",
        "",
        "| step | batch | context | kernels ms | twin ms | twin / kernels |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.kind} | {r.batch} | {r.context} | {r.kernels_ms:.3f} | {r.twin_ms:.3f} |"
            f" {r.ratio:.2f} |"
        )
    if overlap:
        lines += [
            "",
            "## Do the linear layers and the attention of a step add, or does one hide the other?",
            "",
            f"From `{kernels.overlap_raw}`: the 32 layers' linear layers alone, their attention"
            " alone, and both interleaved as the model runs them, each in one CUDA graph. One"
            " roofline over the whole step would give step ≈ the larger; kernels that add give"
            " step ≈ the sum, which is what the step-time model takes (a roofline per kind of"
            " kernel, docs/twin-calibration.md §2.3).",
            "",
            "| batch | context | linear ms | attention ms | step ms | step / sum | step / larger |",
            "|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for o in overlap:
            lines.append(
                f"| {o.batch} | {o.context} | {o.linear_ms:.3f} | {o.attention_ms:.3f} |"
                f" {o.step_ms:.3f} | {o.over_sum:.3f} | {o.over_max:.3f} |"
            )
    return "\n".join(lines) + "\n"


def write_plot(kernels: KernelSource, rows: Sequence[ParityRow], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    decode = [r for r in rows if r.kind == "decode"]
    for ctx in sorted({r.context for r in decode}):
        pts = [r for r in decode if r.context == ctx]
        ax.plot([r.batch for r in pts], [r.ratio for r in pts], "o-", label=f"decode, {ctx} ctx")
    prefill = [r for r in rows if r.kind == "prefill"]
    if prefill:
        ax.plot([r.context for r in prefill], [r.ratio for r in prefill], "s--",
                label="prefill (x: prompt tokens)")  # fmt: skip
    ax.axhline(1.0, color="grey", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch (decode) or prompt length (prefill)")
    ax.set_ylabel("twin GPU terms / measured kernels")
    ax.set_title(f"{kernels.gpu_profile}: step-time model against its kernels")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", metavar="ID", help="a `kernels` id of the measurement set")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the results")
    args = parser.parse_args(argv)
    measurements = load_measurements()
    chosen = [k for k in measurements.kernels if args.kernels in (None, k.id)]
    if not chosen:
        known = ", ".join(k.id for k in measurements.kernels) or "none"
        print(f"kernel_parity: --kernels {args.kernels!r} is not in the set (known: {known})",
              file=sys.stderr)  # fmt: skip
        return 2
    kernels = chosen[0]
    runs: list[dict[str, Any]] = json.loads((ROOT / kernels.raw).read_text())["runs"]
    catalog = load_catalog()
    gpu = catalog.gpu(kernels.gpu_profile)
    rows = step_parity(runs, gpu, catalog.model(MODEL), catalog.coefficients)
    problems = overreach(kernels.ceilings, gpu, catalog.coefficients)
    overlap: list[OverlapRow] = []
    if kernels.overlap_raw is not None:
        overlap = step_overlap(json.loads((ROOT / kernels.overlap_raw).read_text())["runs"])
    stem = f"kernel_parity_{kernels.gpu_profile.split('-')[0].lower()}"
    args.out.mkdir(parents=True, exist_ok=True)
    body = {
        "kernels": kernels.id,
        "gpu_profile": kernels.gpu_profile,
        "model": MODEL,
        "overreach": problems,
        "steps": [{**r.__dict__, "ratio": round(r.ratio, 4)} for r in rows],
        "step_overlap": [
            {**o.__dict__, "over_sum": round(o.over_sum, 4), "over_max": round(o.over_max, 4)}
            for o in overlap
        ],
    }
    (args.out / f"{stem}.json").write_text(json.dumps(body, indent=1) + "\n")
    rates = assumed_rates(kernels.ceilings, gpu, catalog.coefficients)
    markdown = render_markdown(kernels, rates, rows, problems, overlap)
    (args.out / f"{stem}.md").write_text(markdown)
    write_plot(kernels, rows, args.out / f"{stem}.png")
    print(markdown)
    print(f"wrote {args.out / stem}.{{json,md,png}}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
