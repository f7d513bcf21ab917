"""What one pod serves within the SLO, from the calibrated engine model (issue 14 item 1).

For the workload a pod sees (tuning/observed_workload.py), its budgets in force, GPU and model,
the capacity is the largest per-pod Poisson arrival rate whose point the planner's evaluation
(planning/evaluate.py, the twin's step-time model) finds within the SLO: TTFT p95, ITL p95 and
the 503 share, without the planner's margin (the tuner applies its own headroom, as it does to
the capacity it observes). Found by doubling, then bisection on the rate to RELATIVE_PRECISION.

A cold evaluation replays a few minutes of arrivals per probe, so results are cached per
CapacityKey: GPU, model, budgets, max_model_len, SLO and the WorkloadBucket. The bucket
quantises each length distribution on a log scale (its mean in quarter-octave steps, its
lognormal spread in steps of 0.25, its longest populated histogram edge), and the model is run
on the bucket's representative, a lognormal of that mean and spread capped at that edge: every
service in a bucket gets the same figure, whichever was seen first, and a pass over 1,000
services of a few kinds costs a few cold evaluations. `CapacityCache` (an LRU the operator
process holds) is the only state; everything else is pure.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from vllm_operator.api.budgets import BUDGET_FIELDS
from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.planning.candidate import Candidate, Target
from vllm_operator.planning.evaluate import Setting, evaluate_unless_missed
from vllm_operator.planning.lengths import MAX_TOKENS, Empirical
from vllm_operator.planning.workload import Workload, build_arrivals
from vllm_operator.sim.catalog import Catalog
from vllm_operator.sim.workload import LengthDist
from vllm_operator.tuning.inputs import budget_in_force, targets_of
from vllm_operator.tuning.model import CapacityEstimate, MetricsSnapshot, TuningState
from vllm_operator.tuning.observed_workload import (
    ServiceLoad,
    Unmeasured,
    observed_workload,
    reporting_pods,
)
from vllm_operator.tuning.settings import TuningSettings

STEPS_PER_OCTAVE = 4  # a mean bucket is 2^(1/4) = 19% wide
SIGMA_STEP = 0.25
SIGMA_MAX = 2.0
RELATIVE_PRECISION = 0.05  # bisection stops when the bracket is this narrow
HORIZON = 180.0  # seconds of arrivals each probe replays (after the planner's warm-up) ...
PROBE_REQUESTS = 1500  # ... or fewer at high rates, down to MIN_HORIZON: a probe's cost is
MIN_HORIZON = 20.0  # its requests, and ~1,500 give a p95 to within a few percent
MIN_RATE, MAX_RATE = 0.05, 1024.0  # requests/s per pod the search spans
SEED = 0
CACHE_SIZE = 4096


@dataclass(frozen=True)
class LengthBucket:
    """A length distribution's bucket: the representative's parameters."""

    mean: float
    sigma: float  # lognormal spread; 0 = fixed
    cap: int

    def representative(self) -> LengthDist:
        if self.sigma == 0:
            return LengthDist("fixed", self.mean, cap=self.cap)
        return LengthDist("lognormal", self.mean, self.sigma, cap=self.cap)

    def describe(self) -> str:
        return f"~{self.mean:.0f} tokens (sigma {self.sigma:g}, at most {self.cap})"


@dataclass(frozen=True)
class WorkloadBucket:
    prompt: LengthBucket
    output: LengthBucket
    burst: float = 1.0  # one pod's mean burst (observed_workload.burst_size's grid)

    def describe(self) -> str:
        lengths = f"prompts {self.prompt.describe()}, outputs {self.output.describe()}"
        return lengths if self.burst == 1 else f"{lengths}, in bursts of {self.burst:.3g}"


@dataclass(frozen=True)
class CapacityKey:
    gpu: str
    gpus_per_pod: int
    model: str
    budgets: tuple[tuple[str, int], ...]  # sorted (vLLM dest, value), set ones only
    max_model_len: int | None
    target: Target
    bucket: WorkloadBucket


@dataclass(frozen=True)
class ModelCapacity:
    """The model's per-pod capacity for a service, and what it was computed for."""

    per_pod: float  # requests/s; 0 when even MIN_RATE misses the SLO
    key: CapacityKey
    at: datetime


def length_bucket(dist: Empirical) -> LengthBucket:
    """The bucket of one observed length distribution."""
    mean = dist.mean
    cv2 = max(0.0, dist.second_moment / (mean * mean) - 1)
    sigma = min(SIGMA_MAX, round(math.sqrt(math.log1p(cv2)) / SIGMA_STEP) * SIGMA_STEP)
    step = round(math.log2(max(mean, 1.0)) * STEPS_PER_OCTAVE)
    populated = [
        e
        for e, c, p in zip(dist.edges, dist.cumulative, (0.0, *dist.cumulative), strict=False)
        if c > p
    ]
    return LengthBucket(
        mean=round(2 ** (step / STEPS_PER_OCTAVE), 1),
        sigma=sigma,
        cap=int(max(populated, default=dist.edges[-1])),
    )


def budgets_in_force(
    spec: VLLMServiceSpec, overrides: Mapping[str, int]
) -> tuple[tuple[str, int], ...]:
    """(vLLM dest, value) of every budget set in force (tuning/inputs.py reads them), sorted."""
    values = ((f.dest, budget_in_force(spec, overrides, f.key)) for f in BUDGET_FIELDS)
    return tuple(sorted((dest, v) for dest, v in values if v is not None))


def capacity_key(
    spec: VLLMServiceSpec,
    load: ServiceLoad,
    budgets: tuple[tuple[str, int], ...],
    max_rejection: float,
) -> CapacityKey | Unmeasured:
    slo = spec.slo
    if slo is None or slo.ttft_p95_seconds is None:
        return Unmeasured("spec.slo.ttftP95 is not set")
    prompt, output = load.workload.prompt, load.workload.output
    assert isinstance(prompt, Empirical) and isinstance(output, Empirical)
    for name, dist in (("prompt", prompt), ("output", output)):
        # a request has a token at least; a histogram that says less (edges below 1, a huge
        # edge that overflows the moments) describes no workload the model can replay
        usable = math.isfinite(dist.mean) and math.isfinite(dist.second_moment)
        if not (usable and dist.mean >= 1 and dist.edges[-1] <= MAX_TOKENS):
            return Unmeasured(f"the {name} token histogram has no usable buckets")
    engine = spec.engine
    return CapacityKey(
        gpu=load.gpu,
        gpus_per_pod=load.gpus_per_pod,
        model=load.model,
        budgets=budgets,
        max_model_len=None if engine is None else engine.max_model_len,
        target=Target(slo.ttft_p95_seconds, slo.itl_p95_seconds, max_rejection, margin=0.0),
        bucket=WorkloadBucket(length_bucket(prompt), length_bucket(output), load.workload.burst),
    )


def _meets(key: CapacityKey, catalog: Catalog, rate: float, horizon: float) -> bool:
    bucket = key.bucket
    workload = Workload(
        kind="poisson",
        label="capacity",
        rate=rate,
        prompt=bucket.prompt.representative(),
        output=bucket.output.representative(),
        seed=SEED,
        horizon=max(MIN_HORIZON, min(horizon, PROBE_REQUESTS / rate)),
        burst=bucket.burst,
    )
    candidate = Candidate(
        key.gpu, 1, key.gpus_per_pod, budgets=key.budgets, max_model_len=key.max_model_len
    )
    setting = Setting(catalog, key.model, key.target, costs={})
    # a verdict: the replay may stop once a miss is certain (most probes of the search miss)
    point, _ = evaluate_unless_missed(
        candidate, workload, build_arrivals(workload), setting, "capacity"
    )
    return point is not None and point.meets_slo


def compute_capacity(key: CapacityKey, catalog: Catalog, horizon: float = HORIZON) -> float:
    """The largest per-pod rate within the SLO (req/s), to RELATIVE_PRECISION; 0 when none.

    `horizon`: seconds of arrivals per probe (shorter is cheaper and noisier).

    Raises ValueError when vLLM would not start with the key's GPU, model and budgets, and
    KeyError when the catalog has no profile for the GPU or the model.
    """
    return largest_rate(lambda rate: _meets(key, catalog, rate, horizon))


def largest_rate(meets: Callable[[float], bool]) -> float:
    """The largest per-pod rate (req/s) that `meets`, to RELATIVE_PRECISION: doubling from
    MIN_RATE until one misses, then bisection; 0 when MIN_RATE misses, MAX_RATE at most."""
    low, high = 0.0, MIN_RATE
    while meets(high):  # double until a rate misses
        low, high = high, high * 2
        if high > MAX_RATE:
            return MAX_RATE
    if low == 0.0:
        return 0.0
    while high - low > RELATIVE_PRECISION * low:
        mid = (low + high) / 2
        low, high = (mid, high) if meets(mid) else (low, mid)
    return low


class CapacityCache:
    """Capacities by key, least recently used dropped beyond `size`: the operator's one copy.

    Tuning passes of different services run on a thread pool (handlers/passes.py), so the
    entries are guarded by a lock; a key two passes miss at once is computed by both (the same
    figure), rather than one pass waiting seconds on the other's evaluation.
    """

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._entries: OrderedDict[CapacityKey, float] = OrderedDict()
        self._lock = threading.Lock()
        self.misses = 0

    def get(self, key: CapacityKey, compute: Callable[[CapacityKey], float]) -> float:
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
            self.misses += 1
        value = compute(key)
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._entries)


def model_capacity(
    spec: VLLMServiceSpec,
    snapshot: MetricsSnapshot,
    state: TuningState,
    settings: TuningSettings,
    *,
    catalog: Catalog,
    cache: CapacityCache,
) -> ModelCapacity | Unmeasured:
    """The model's capacity per pod, with the budgets in force, for what the snapshot saw;
    Unmeasured says why not. The handler and the benchmark both call this once per pass."""
    replicas = spec.replicas if state.desired_replicas is None else state.desired_replicas
    load = observed_workload(spec, snapshot, reporting_pods(snapshot, replicas))
    if isinstance(load, Unmeasured):
        return load
    budgets = budgets_in_force(spec, state.overrides)
    max_rejection = targets_of(spec, settings).max_rejection_ratio
    key = capacity_key(spec, load, budgets, max_rejection)
    if isinstance(key, Unmeasured):
        return key
    try:
        per_pod = cache.get(key, lambda k: compute_capacity(k, catalog))
    except KeyError as exc:
        return Unmeasured(f"no engine profile: {exc.args[0]}")
    except ValueError as exc:
        return Unmeasured(f"the engine model would not start: {exc}")
    return ModelCapacity(per_pod, key, snapshot.observed_at)


def capacity_estimates(found: ModelCapacity | Unmeasured) -> tuple[CapacityEstimate, ...]:
    """What decide(..., capacities=...) takes of model_capacity's answer."""
    if isinstance(found, Unmeasured):
        return ()
    return (CapacityEstimate(found.per_pod, "model", found.at, found.key.bucket.describe()),)
