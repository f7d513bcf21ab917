"""Fit the twin's coefficients to the measurement set's fit points (never the held-out ones).

What is fitted, and from which data:
- per GPU, from that GPU's fit points: `mfu_prefill`, `mfu_decode`, `eta_w` and `eta_kv` (the
  shares of bandwidth achieved when streaming weights and when reading the KV cache), and then
  both etas at once (`_trade`: points that fill the KV cache fix only their mix);
- a GPU without fit points gets the prefill efficiency its power limit sustains at the fitted
  GPUs' median prefill TFLOPS per watt (at most the best fitted `mfu_prefill`), and the fitted
  GPUs' median `mfu_decode` (`pooled`; `leave_one_out` checks the rule on the fitted GPUs);
- shared by all GPUs, from every fit point: `api_overhead` (the API server's latency per
  request, what low-load TTFT adds to the prefill), `api_request_cost` (its serial CPU time
  per request, what makes throughput plateau when a burst arrives), `api_chat_cost` (the extra
  of a chat request: template and messages), `overlap` (how smooth the roofline's turn from
  memory- to compute-bound steps is) and `c_req` (the engine's CPU time per scheduled request
  per step: what slows a large batch's step beyond its GPU time).

The loss of a set of points is the mean over (point, group) of the mean |log(sim / measured)|
of the group's quantities (TTFT, TPOT/ITL, throughput, latency): each point's groups weigh the
same however many throughput figures its source printed, and a factor of 2 too high costs as much
as a factor of 2 too low. A prior (PRIOR_WEIGHT) holds each parameter near its hand-written value
unless the data pay for moving it. Coordinate descent: each parameter in turn is set by a
golden-section search on its range, the others held; `rounds` passes. Deterministic: the same
inputs give the same profile.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vllm_operator.sim.catalog import Catalog
from vllm_operator.sim.engine import GpuProfile, StepCoefficients
from vllm_operator.sim.engine.profiles import prefill_mfu
from vllm_twin.calibration.measurements import MeasurementSet, Point
from vllm_twin.calibration.replay import NotSimulableError, replay_point

# parameter -> (low, high, log scale)
GPU_PARAMS = {
    "mfu_prefill": (0.15, 0.9, True),
    "mfu_decode": (0.05, 0.9, True),
    "eta_w": (0.3, 1.0, True),
    "eta_kv": (0.2, 1.0, True),
}
# the prior: each parameter's distance from its hand-written value costs PRIOR_WEIGHT per unit
# of |log ratio| (per full range for the linear ones), so a parameter the data do not pin down
# stays where the datasheet and BLIS put it instead of wandering to a bound
PRIOR_WEIGHT = 0.05
SHARED_PARAMS = {
    "api_overhead": (0.002, 0.08, True),
    "api_request_cost": (0.0, 0.04, False),
    "api_chat_cost": (0.0, 0.04, False),
    "overlap": (0.0, 0.8, False),
    "c_req": (0.0, 60e-6, False),
}
# GpuProfile fields whose fitted median becomes the StepCoefficients default (`pooled`)
POOLED_PARAMS = ("mfu_prefill", "mfu_decode")
_GOLDEN = (math.sqrt(5) - 1) / 2


@dataclass(frozen=True)
class Fitted:
    gpus: dict[str, dict[str, float]]  # GPU profile -> fitted fields
    coefficients: dict[str, float]
    loss_before: float
    loss_after: float
    points: int


def loss(points: Sequence[Point], catalog: Catalog) -> float:
    terms: list[float] = []
    for point in points:
        try:
            replayed = replay_point(point, catalog)
        except NotSimulableError:
            continue
        groups: dict[str, list[float]] = {}
        for c in replayed.comparisons:
            if c.simulated > 0:
                groups.setdefault(c.group, []).append(abs(math.log(c.simulated / c.measured)))
        terms += [statistics.fmean(v) for v in groups.values()]
    return statistics.fmean(terms) if terms else 0.0


def simulable(measurements: MeasurementSet, catalog: Catalog) -> list[Point]:
    """The fit points the twin can replay (held-out points are never returned)."""
    return [
        point
        for point in measurements.split("fit")
        if point.setup.gpu_profile in catalog.gpus and point.setup.model_profile in catalog.models
    ]


def golden(f: Callable[[float], float], low: float, high: float, log: bool, evals: int) -> float:
    """The argmin of a unimodal `f` on [low, high] after `evals` evaluations."""
    to = (lambda u: math.exp(u)) if log else (lambda u: u)
    a, b = (math.log(low), math.log(high)) if log else (low, high)
    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    fc, fd = f(to(c)), f(to(d))
    for _ in range(max(evals - 2, 0)):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - _GOLDEN * (b - a)
            fc = f(to(c))
        else:
            a, c, fc = c, d, fd
            d = a + _GOLDEN * (b - a)
            fd = f(to(d))
    return to(c if fc <= fd else d)


def _with_gpu(catalog: Catalog, name: str, **fields: Any) -> Catalog:
    gpus = dict(catalog.gpus)
    gpus[name] = dataclasses.replace(gpus[name], **fields)
    return dataclasses.replace(catalog, gpus=gpus)


def _with_coeffs(catalog: Catalog, **fields: Any) -> Catalog:
    return dataclasses.replace(
        catalog, coefficients=dataclasses.replace(catalog.coefficients, **fields)
    )


def _gpu_value(gpu: GpuProfile, coeffs: StepCoefficients, name: str) -> float:
    value = getattr(gpu, name)
    return float(value if value is not None else getattr(coeffs, name))


def prior_cost(value: float, prior: float, low: float, high: float, log: bool) -> float:
    if log:
        return PRIOR_WEIGHT * abs(math.log(value / prior))
    return PRIOR_WEIGHT * abs(value - prior) / (high - low)


def _shared_loss(
    points: Sequence[Point], catalog: Catalog, base: Catalog, name: str
) -> Callable[[float], float]:
    low, high, log = SHARED_PARAMS[name]
    prior = float(getattr(base.coefficients, name))
    return lambda value: (
        loss(points, _with_coeffs(catalog, **{name: value}))
        + prior_cost(value, prior, low, high, log)
    )


def _gpu_loss(
    points: Sequence[Point], catalog: Catalog, base: Catalog, gpu: str, name: str
) -> Callable[[float], float]:
    low, high, log = GPU_PARAMS[name]
    prior = _gpu_value(base.gpus[gpu], base.coefficients, name)
    return lambda value: (
        loss(points, _with_gpu(catalog, gpu, **{name: value}))
        + prior_cost(value, prior, low, high, log)
    )


def _trade(
    points: Sequence[Point], catalog: Catalog, base: Catalog, gpu: str
) -> tuple[Callable[[float], float], float, float]:
    """Loss of eta_w * k with eta_kv / k, and k's range; both priors counted.

    Where a GPU's fit points all fill the KV cache, their decode steps read about the same
    bytes of weights and of KV, so the data fix a mix of the two efficiencies, not each: a
    search of one with the other held stops where it started, at whichever one the descent
    moved first. This direction moves both at once and lets the priors choose in the valley.
    """
    own, coeffs = catalog.gpus[gpu], catalog.coefficients
    w, kv = _gpu_value(own, coeffs, "eta_w"), _gpu_value(own, coeffs, "eta_kv")
    priors = {n: _gpu_value(base.gpus[gpu], base.coefficients, n) for n in ("eta_w", "eta_kv")}

    def f(k: float) -> float:
        values = {"eta_w": w * k, "eta_kv": kv / k}
        cost = sum(prior_cost(v, priors[n], *GPU_PARAMS[n]) for n, v in values.items())
        return loss(points, _with_gpu(catalog, gpu, **values)) + cost

    (w_low, w_high, _), (kv_low, kv_high, _) = GPU_PARAMS["eta_w"], GPU_PARAMS["eta_kv"]
    return f, max(w_low / w, kv / kv_high), min(w_high / w, kv / kv_low)


def _trade_step(
    points: Sequence[Point], catalog: Catalog, base: Catalog, gpu: str, evals: int
) -> Catalog:
    f, low, high = _trade(points, catalog, base, gpu)
    k = golden(f, low, high, True, evals) if low < high else 1.0
    if f(k) >= f(1.0):
        return catalog
    own = catalog.gpus[gpu]
    w, kv = (
        _gpu_value(own, catalog.coefficients, "eta_w"),
        _gpu_value(own, catalog.coefficients, "eta_kv"),
    )
    return _with_gpu(catalog, gpu, eta_w=w * k, eta_kv=kv / k)


def fit(
    measurements: MeasurementSet,
    catalog: Catalog,
    *,
    rounds: int = 2,
    evals: int = 10,
    progress: Callable[[str], None] | None = None,
) -> Fitted:
    points = simulable(measurements, catalog)
    by_gpu: dict[str, list[Point]] = {}
    for point in points:
        by_gpu.setdefault(str(point.setup.gpu_profile), []).append(point)
    before = loss(points, catalog)
    base = catalog
    for _ in range(rounds):
        for name, (low, high, log) in SHARED_PARAMS.items():
            best = golden(_shared_loss(points, catalog, base, name), low, high, log, evals)
            catalog = _with_coeffs(catalog, **{name: best})
            if progress:
                progress(f"{name} = {best:.4g}")
        for gpu, mine in sorted(by_gpu.items()):
            for name, (low, high, log) in GPU_PARAMS.items():
                best = golden(_gpu_loss(mine, catalog, base, gpu, name), low, high, log, evals)
                catalog = _with_gpu(catalog, gpu, **{name: best})
                if progress:
                    progress(f"{gpu} {name} = {best:.4g}")
            catalog = _trade_step(mine, catalog, base, gpu, evals)
            if progress:
                g = catalog.gpus[gpu]
                progress(f"{gpu} eta_w/eta_kv traded: {g.eta_w:.4g} / {g.eta_kv:.4g}")
    gpus = {
        gpu: {
            name: round(_gpu_value(catalog.gpus[gpu], catalog.coefficients, name), 4)
            for name in GPU_PARAMS
        }
        for gpu in sorted(by_gpu)
    }
    coefficients = {
        name: round(float(getattr(catalog.coefficients, name)), 6) for name in SHARED_PARAMS
    }
    coefficients.update(pooled(gpus, catalog.gpus))
    return Fitted(gpus, coefficients, before, loss(points, catalog), len(points))


def pooled(
    gpus: dict[str, dict[str, float]], profiles: Mapping[str, GpuProfile]
) -> dict[str, float]:
    """What a GPU nothing was measured on takes (`profiles.prefill_mfu`): the fitted GPUs'
    median efficiencies, their median prefill TFLOPS per watt of TDP and their best
    `mfu_prefill` (the ceiling the per-watt figure may not lift an unseen GPU above).

    Medians, not one borrowed GPU's values: an unseen GPU is more likely typical than like any
    one other, and a median is not pulled by a GPU whose points leave a value near its prior
    (the L4's decode efficiency: its 0.5B model never makes decode compute-bound). Prefill is
    priced by power because the fitted GPUs sustain about the same TFLOPS per watt at shares of
    their datasheet peaks that differ far more (docs/twin-calibration.md §2.5, `leave_one_out`).
    """
    if not gpus:
        return {}
    out = {
        name: round(statistics.median(g[name] for g in gpus.values()), 4) for name in POOLED_PARAMS
    }
    per_watt = _per_watt(gpus, profiles)
    if per_watt:
        out["prefill_tflops_per_watt"] = round(statistics.median(per_watt.values()), 4)
        out["mfu_prefill_max"] = round(max(g["mfu_prefill"] for g in gpus.values()), 4)
    return out


def _per_watt(
    gpus: dict[str, dict[str, float]], profiles: Mapping[str, GpuProfile]
) -> dict[str, float]:
    """Each fitted GPU's prefill TFLOPS per watt of TDP (those with a TDP)."""
    out: dict[str, float] = {}
    for name, fitted in gpus.items():
        tdp = profiles[name].tdp_watts
        if tdp is not None:
            out[name] = fitted["mfu_prefill"] * profiles[name].tflops / tdp
    return out


@dataclass(frozen=True)
class Unseen:
    """One fitted GPU's `mfu_prefill` beside what each rule gives it from the others alone."""

    gpu: str
    fitted: float
    by_power: float  # min(best other, the others' median TFLOPS/W x TDP / peak)
    by_median: float  # the others' median mfu_prefill


def leave_one_out(
    gpus: dict[str, dict[str, float]], profiles: Mapping[str, GpuProfile]
) -> list[Unseen]:
    """Treat each fitted GPU in turn as unseen: how far off would `pooled` have put it?"""
    out: list[Unseen] = []
    for name in sorted(gpus):
        others = {n: g for n, g in gpus.items() if n != name}
        rule = pooled(others, profiles)
        gpu = profiles[name]
        if gpu.tdp_watts is None or "prefill_tflops_per_watt" not in rule:
            continue
        unseen = dataclasses.replace(gpu, mfu_prefill=None)
        by_power = prefill_mfu(unseen, dataclasses.replace(StepCoefficients(), **rule))
        out.append(Unseen(name, gpus[name]["mfu_prefill"], by_power, rule["mfu_prefill"]))
    return out
