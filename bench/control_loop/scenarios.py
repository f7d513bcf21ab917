"""The GPU profiles, workloads and service specs every policy is measured on.

A scenario is one GPU profile (GPU type, model, SLO, budgets, replica limits) and one workload.
Every policy of a scenario gets the same arrivals, GPU, SLO and [min, max] replicas. The service
spec is what a user would write for the operator: vLLM's defaults for the GPU written out, a
running cap (`maxSeqs`) about 1.5x the concurrency one replica holds at the SLO, and an entry valve
(`maxRequests`) at twice that, so that overload becomes fast 503s rather than an unbounded queue.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from vllm_operator.api.spec import VLLMServiceSpec
from vllm_operator.sim.engine import SimRequest
from vllm_operator.sim.report import Slo
from vllm_operator.sim.workload import LengthDist, azure_trace, bursty, diurnal, ramp, step

MIN_REPLICAS, MAX_REPLICAS = 1, 8
MAX_REJECTION_RATIO = 0.005


@dataclass(frozen=True)
class Profile:
    name: str
    gpu: str  # catalog GPU
    model: str  # catalog model profile
    hf_model: str  # what the spec names
    slo: Slo
    max_seqs: int
    max_requests: int
    max_batched_tokens: int  # vLLM's default for the GPU, written out
    max_model_len: int = 16384  # the traces' longest prompt is 14050 tokens
    max_active_seqs: int | None = None  # unset: vLLM runs maxSeqs
    # maxReplicas: no policy (nor the oracle) gets more pods than this (harness.Controls)
    max_replicas: int = MAX_REPLICAS
    # the GPUs of the type the cluster has for the service: above max_replicas, a rollout can
    # surge (harness.Controls.restart)
    gpus: int = MAX_REPLICAS
    # autotune.bounds.maxBatchedTokens.min, where the spec widens the default range down
    tokens_min: int | None = None

    @property
    def pod_cap(self) -> int:
        """The most pods that can serve: maxReplicas, or the cluster's GPUs when fewer."""
        return min(self.max_replicas, self.gpus)

    def budgets(self) -> str:
        active = "" if self.max_active_seqs is None else f", maxActiveSeqs {self.max_active_seqs}"
        cap = "" if self.max_replicas == MAX_REPLICAS else f"; maxReplicas {self.max_replicas}"
        if self.tokens_min is not None:
            cap += f"; autotune bounds maxBatchedTokens >= {self.tokens_min}"
        if self.gpus < self.max_replicas:
            cap += f"; {self.gpus} GPUs of the type free in the cluster"
        return (
            f"maxRequests {self.max_requests}, maxSeqs {self.max_seqs}{active}, "
            f"maxBatchedTokens {self.max_batched_tokens}{cap}"
        )

    def spec(
        self, replicas: int, autotune: str, *, budgets: bool = True, period: float | None = None
    ) -> VLLMServiceSpec:
        """The VLLMService spec; without `budgets`, vLLM's defaults (the static policies);
        `period`: the traffic's period it declares (spec.autoscaling.forecastPeriod)."""
        data: dict[str, Any] = {
            "model": self.hf_model,
            "replicas": replicas,
            "gpu": {"type": self.gpu},
            "engine": {"maxModelLen": self.max_model_len},
            "slo": {
                "ttftP95": f"{round(self.slo.ttft * 1000)}ms",
                "itlP95": f"{round(self.slo.itl * 1000)}ms",
                "maxRejectionRatio": MAX_REJECTION_RATIO,
            },
            "autoscaling": {
                "enabled": True,
                "minReplicas": MIN_REPLICAS,
                "maxReplicas": self.max_replicas,
                **({} if period is None else {"forecastPeriod": f"{period:g}s"}),
            },
            "autotune": {"mode": autotune},
        }
        if self.tokens_min is not None:
            bounds = {"maxBatchedTokens": {"min": self.tokens_min}}
            data["autotune"]["bounds"] = bounds
        if budgets:
            running: dict[str, int] = {"maxSeqs": self.max_seqs}
            if self.max_active_seqs is not None:
                running["maxActiveSeqs"] = self.max_active_seqs
            data["budgets"] = {
                "queue": {"maxRequests": self.max_requests},
                "running": running,
                "tokens": {"maxBatchedTokens": self.max_batched_tokens},
            }
        return VLLMServiceSpec.model_validate(data)


H100 = Profile(
    name="h100-8b",
    gpu="H100-80GB",
    model="Llama-3.1-8B",
    hf_model="meta-llama/Llama-3.1-8B-Instruct",
    slo=Slo(ttft=0.5, itl=0.03),
    max_seqs=64,
    max_requests=128,
    max_batched_tokens=8192,
)
L4 = Profile(
    name="l4-3b",
    gpu="L4",
    model="Llama-3.2-3B",
    hf_model="meta-llama/Llama-3.2-3B-Instruct",
    slo=Slo(ttft=2.0, itl=0.1),
    max_seqs=32,
    max_requests=64,
    max_batched_tokens=2048,
)
# The same L4 service with its entry valve set far too tight (8 requests in flight per pod, a
# quarter of maxSeqs): the one scenario where the budget rules have something to fix, so that
# ours-full is seen retuning, restarts and all.
L4_TIGHT = replace(L4, name="l4-3b-valve8", max_requests=8)
# issue 15: budgets mis-set the way they are copied from blog posts, and a GPU cap; the services
# where the budget lever must matter. On the H100 chat service, the blog's queue 32, running 16,
# active 8 (a quarter of what one pod holds at the SLO); on the L4 3B service, max-num-seqs 256
# (its valve twice that, the profiles' convention), so a pod runs every request it admits.
H100_BLOG = replace(H100, name="h100-8b-blog", max_requests=32, max_seqs=16, max_active_seqs=8)
L4_SEQS256 = replace(L4, name="l4-3b-seqs256", max_seqs=256, max_requests=512)
# maxReplicas 2 where the diurnal peak needs 3: the replica lever is capped (the cluster still
# has its 8 L4s, so a rollout surges)
L4_CAP = replace(L4, name="l4-3b-cap2", max_replicas=2)
# The same cap set by the cluster instead: 2 L4s free for the service, maxReplicas 8. A pod
# asked for beyond them waits Pending, Unschedulable, and a rollout cannot surge.
L4_GPUS2 = replace(L4, name="l4-3b-gpus2", gpus=2)
L4_TIGHT_GPUS4 = replace(L4_TIGHT, name="l4-3b-valve8-gpus4", gpus=4)
# The H100 service whose spec lets the tuner take the per-step token budget down to 512, past
# the default range's 1024 (8192 / 8): for code prompts under a 30 ms ITL SLO (bench/results/
# arrival_burstiness.md: 512 keeps the ITL of bursts of 2k-token prompts under it, 1024 not).
H100_TOKENS = replace(H100, name="h100-8b-tokens512", tokens_min=512)
PROFILES = {
    p.name: p
    for p in (
        H100, L4, L4_TIGHT, H100_BLOG, L4_SEQS256, L4_CAP, L4_GPUS2, L4_TIGHT_GPUS4, H100_TOKENS
    )
}  # fmt: skip


SEEDS = 5  # runs per scenario; the report gives means with 95% intervals
SEED_STEP = 300.0  # trace workloads: each seed starts the trace 5 minutes further on
NODE_LOSS_AT = 1800.0  # the node-loss scenario loses half the pods' nodes at minute 30
DAYS = 2  # the multi-day workload: this many days squeezed into the run
BURST_PERIOD = 900.0  # the bursty workload: on for the first third of every 15 minutes
STEP_AT, STEP_RISE, STEP_FACTOR = 1200.0, 60.0, 3.0  # x3 in one minute at minute 20


@dataclass(frozen=True)
class Scenario:
    profile: Profile
    workload: str  # conv | code | shift | bursty | diurnal | multiday | step | ramp | flat
    duration: float  # virtual seconds of arrivals
    rate: float  # trace rate multiplier, or the synthetic workload's peak rate (req/s)
    start: float = 0.0  # trace seconds to start from
    lengths: tuple[int, int] = (1024, 160)  # synthetic: mean prompt and output tokens, lognormal
    seed: int = 7
    node_loss_at: float | None = None  # half the pods' nodes are lost at this time
    lever: bool = False  # issue 15: the budget lever must matter here (its target row applies)
    # the period the service's traffic repeats with, as its owner declares it in
    # spec.autoscaling.forecastPeriod (None: omitted, the default day, longer than any run)
    period: float | None = None

    @property
    def name(self) -> str:
        suffix = "" if self.node_loss_at is None else "-nodeloss"
        return f"{self.profile.name}/{self.workload}{suffix}"

    def seeded(self, k: int) -> Scenario:
        """The k-th run of this scenario: other arrivals (synthetic), another stretch of the
        trace (traces), and other model-load delays (all)."""
        return replace(self, seed=self.seed + k, start=self.start + k * SEED_STEP
                       if self.workload in TRACES else self.start)  # fmt: skip

    def describe(self) -> str:
        minutes = f"{self.duration / 60:.0f} min"
        loss = (
            ""
            if self.node_loss_at is None
            else f"; half the pods' nodes lost at minute {self.node_loss_at / 60:.0f}"
        )
        return self._workload_phrase(minutes) + loss

    def _workload_phrase(self, minutes: str) -> str:
        if self.workload in ("conv", "code"):
            since = f"from trace minute {self.start / 60:.0f} (+5 per seed)"
            return f"Azure 2023 {self.workload} trace x{self.rate:g} {since}, {minutes}"
        if self.workload == "shift":
            since = f"from trace minute {self.start / 60:.0f} (+5 per seed)"
            return (
                f"Azure 2023 conv trace x{self.rate:g}, then from minute "
                f"{self.duration / 120:.0f} the code trace x{self.rate:g}, {since}, {minutes}"
            )
        sizes = f"prompts ~{self.lengths[0]} / outputs ~{self.lengths[1]} tokens"
        low = f"{self.rate / 6:.3g}"
        if self.workload == "bursty":
            rates = f"{self.rate:g} / {self.rate / 5:.3g} req/s"
            return f"on/off {rates}, 5 min on / 10 min off, {sizes}, {minutes}"
        if self.workload == "multiday":
            rates = f"{low} -> {self.rate:g} -> {low} req/s"
            return f"{DAYS} diurnal days of {self.duration / DAYS / 60:.0f} min, {rates}, {sizes}"
        if self.workload == "step":
            base = f"{self.rate / STEP_FACTOR:.3g}"
            return (
                f"step {base} -> {self.rate:g} req/s (x{STEP_FACTOR:g} in {STEP_RISE:.0f} s) at "
                f"minute {STEP_AT / 60:.0f}, {sizes}, {minutes}"
            )
        if self.workload == "ramp":
            return f"slow ramp {low} -> {self.rate:g} req/s over the run, {sizes}, {minutes}"
        if self.workload == "flat":
            return f"flat {self.rate:g} req/s, {sizes}, {minutes}"
        rates = f"{low} -> {self.rate:g} -> {low} req/s"
        return f"diurnal ramp {rates}, {sizes}, {minutes}"

    def _lengths(self) -> tuple[LengthDist, LengthDist]:
        prompt, output = self.lengths
        # lognormal, sigma 1: a long tail, capped inside max_model_len
        return (
            LengthDist("lognormal", prompt, 1.0, cap=8192),
            LengthDist("lognormal", output, 1.0, cap=1024),
        )

    def requests(self) -> list[SimRequest]:
        prompt, output = self._lengths()
        if self.workload in ("conv", "code"):
            return azure_trace(
                self.workload,
                rate_multiplier=self.rate,
                start=self.start,
                duration=self.duration,
                loop=True,
            )
        if self.workload == "shift":
            return shifted_prompts(self.rate, self.start, self.duration)
        if self.workload == "bursty":
            # on at the start of each 15 minutes: a burst for 5 minutes, five times the base rate
            on = BURST_PERIOD / 3
            off = BURST_PERIOD - on
            return bursty(self.rate, self.rate / 5, on, off, self.duration, prompt, output,
                          seed=self.seed)  # fmt: skip
        if self.workload in ("diurnal", "multiday"):
            # days squeezed into the run: trough, peak at half a day, trough again;
            # sin(2*pi*t/period) is -1 at 3/4 of the period, so the run starts there
            mean, amplitude = self.rate * 7 / 12, 5 / 7
            d = self.duration / (DAYS if self.workload == "multiday" else 1)
            lead = 0.75 * d
            day = diurnal(mean, amplitude, d, self.duration + lead, prompt, output, self.seed)
            return [_shifted(r, r.arrival - lead) for r in day if r.arrival >= lead]
        if self.workload == "step":
            base = self.rate / STEP_FACTOR
            return step(base, STEP_FACTOR, STEP_AT, STEP_RISE, self.duration, prompt, output,
                        seed=self.seed)  # fmt: skip
        if self.workload == "ramp":
            return ramp(self.rate / 6, self.rate, self.duration, prompt, output, seed=self.seed)
        if self.workload == "flat":  # bench/window_spread.py: a steady Poisson load
            return ramp(self.rate, self.rate, self.duration, prompt, output, seed=self.seed)
        raise ValueError(f"unknown workload {self.workload!r}")


def _shifted(req: SimRequest, arrival: float) -> SimRequest:
    return SimRequest(req.request_id, arrival, req.prompt_tokens, req.max_tokens)


TRACES = ("conv", "code", "shift")


def shifted_prompts(rate: float, start: float, duration: float) -> list[SimRequest]:
    """Conversation prompts for the first half, code prompts (longer, ~2k tokens) after: the
    same service sees its prompts grow mid-run, as when a code assistant moves onto it."""
    half = duration / 2
    conv = azure_trace("conv", rate_multiplier=rate, start=start, duration=half, loop=True)
    code = azure_trace("code", rate_multiplier=rate, start=start, duration=half, loop=True)
    later = [
        SimRequest(f"code-{k}", r.arrival + half, r.prompt_tokens, r.max_tokens)
        for k, r in enumerate(code)
    ]
    return [*conv, *later]


# Rates: the peak needs 2-4 replicas and one hour stays around 5-25 thousand requests, so the
# whole set runs in minutes. The code trace is left out on L4: its bursts of up to 67 requests
# in a second (2k-token prompts) miss a 2 s TTFT p95 there even on 8 replicas.
DEFAULT = (
    Scenario(H100, "conv", 3600, 1.25),
    Scenario(H100, "code", 3600, 1.0),
    Scenario(H100, "bursty", 3600, 12.0, lengths=(2500, 250)),
    Scenario(H100, "diurnal", 3600, 12.0, lengths=(2500, 250)),
    Scenario(L4, "conv", 3600, 0.5, start=1200),
    Scenario(L4, "bursty", 3600, 3.5, period=BURST_PERIOD),
    Scenario(L4, "diurnal", 3600, 3.5),
    Scenario(L4_TIGHT, "diurnal", 3600, 3.5),
    # issue 14: the shapes a reactive controller loses on
    Scenario(L4, "multiday", 3600, 3.5, period=3600 / DAYS),
    Scenario(L4, "step", 3600, 3.5),
    Scenario(L4, "ramp", 3600, 3.5),
    Scenario(L4, "conv", 3600, 0.5, start=1200, node_loss_at=NODE_LOSS_AT),
    # issue 15: where the budget lever must matter (blog budgets, a GPU cap, prompts that grow)
    Scenario(H100_BLOG, "conv", 3600, 1.25, lever=True),
    Scenario(L4_SEQS256, "diurnal", 3600, 3.5, lever=True),
    Scenario(L4_CAP, "diurnal", 3600, 3.5, lever=True),
    Scenario(L4_GPUS2, "diurnal", 3600, 3.5, lever=True),
    Scenario(L4_TIGHT_GPUS4, "diurnal", 3600, 3.5, lever=True),
    Scenario(H100, "shift", 3600, 1.0, lever=True),
    Scenario(H100_TOKENS, "shift", 3600, 1.0, lever=True),
)
# --quick: minutes, not an hour; for the smoke test and a first look
QUICK = (Scenario(L4, "bursty", 1200, 3.5),)
