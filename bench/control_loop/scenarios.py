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
from vllm_operator.sim.workload import LengthDist, azure_trace, bursty, diurnal

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

    def budgets(self) -> str:
        return (
            f"maxRequests {self.max_requests}, maxSeqs {self.max_seqs}, "
            f"maxBatchedTokens {self.max_batched_tokens}"
        )

    def spec(self, replicas: int, autotune: str, *, budgets: bool = True) -> VLLMServiceSpec:
        """The VLLMService spec; without `budgets`, vLLM's defaults (the static policies)."""
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
                "maxReplicas": MAX_REPLICAS,
            },
            "autotune": {"mode": autotune},
        }
        if budgets:
            data["budgets"] = {
                "queue": {"maxRequests": self.max_requests},
                "running": {"maxSeqs": self.max_seqs},
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
PROFILES = {p.name: p for p in (H100, L4, L4_TIGHT)}


@dataclass(frozen=True)
class Scenario:
    profile: Profile
    workload: str  # conv | code | bursty | diurnal
    duration: float  # virtual seconds of arrivals
    rate: float  # trace rate multiplier, or the synthetic workload's peak rate (req/s)
    start: float = 0.0  # trace seconds to start from
    lengths: tuple[int, int] = (1024, 160)  # synthetic: mean prompt and output tokens, lognormal
    seed: int = 7

    @property
    def name(self) -> str:
        return f"{self.profile.name}/{self.workload}"

    def describe(self) -> str:
        minutes = f"{self.duration / 60:.0f} min"
        if self.workload in ("conv", "code"):
            since = f"from trace minute {self.start / 60:.0f}"
            return f"Azure 2023 {self.workload} trace x{self.rate:g} {since}, {minutes}"
        sizes = f"prompts ~{self.lengths[0]} / outputs ~{self.lengths[1]} tokens"
        if self.workload == "bursty":
            rates = f"{self.rate:g} / {self.rate / 5:.3g} req/s"
            return f"on/off {rates}, 5 min on / 10 min off, {sizes}, {minutes}"
        rates = f"{self.rate / 6:.3g} -> {self.rate:g} -> {self.rate / 6:.3g} req/s"
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
        if self.workload == "bursty":
            # on at the start of each 15 minutes: a burst for 5 minutes, five times the base rate
            return bursty(
                self.rate, self.rate / 5, 300, 600, self.duration, prompt, output, seed=self.seed
            )
        if self.workload == "diurnal":
            # one slow day squeezed into the run: trough, peak at half time, trough again;
            # sin(2*pi*t/period) is -1 at 3/4 of the period, so the run starts there
            mean, amplitude, d = self.rate * 7 / 12, 5 / 7, self.duration
            day = diurnal(mean, amplitude, d, 1.75 * d, prompt, output, seed=self.seed)
            return [_shifted(r, r.arrival - 0.75 * d) for r in day if r.arrival >= 0.75 * d]
        raise ValueError(f"unknown workload {self.workload!r}")


def _shifted(req: SimRequest, arrival: float) -> SimRequest:
    return SimRequest(req.request_id, arrival, req.prompt_tokens, req.max_tokens)


# Rates: the peak needs 2-4 replicas and one hour stays around 5-25 thousand requests, so the
# whole set runs in minutes. The code trace is left out on L4: its bursts of up to 67 requests
# in a second (2k-token prompts) miss a 2 s TTFT p95 there even on 8 replicas.
DEFAULT = (
    Scenario(H100, "conv", 3600, 1.25),
    Scenario(H100, "code", 3600, 1.0),
    Scenario(H100, "bursty", 3600, 12.0, lengths=(2500, 250)),
    Scenario(H100, "diurnal", 3600, 12.0, lengths=(2500, 250)),
    Scenario(L4, "conv", 3600, 0.5, start=1200),
    Scenario(L4, "bursty", 3600, 3.5),
    Scenario(L4, "diurnal", 3600, 3.5),
    Scenario(L4_TIGHT, "diurnal", 3600, 3.5),
)
# --quick: minutes, not an hour; for the smoke test and a first look
QUICK = (Scenario(L4, "bursty", 1200, 3.5),)
