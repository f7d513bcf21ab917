"""VLLMService v1alpha1 `spec` models. Field descriptions become `kubectl explain` text."""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from vllm_operator.api import rules
from vllm_operator.api.base import INT32_MAX, SpecModel
from vllm_operator.api.budgets import AutotuneBounds as AutotuneBounds
from vllm_operator.api.budgets import Bound as Bound
from vllm_operator.api.budgets import QueueBudgets as QueueBudgets
from vllm_operator.api.budgets import RunningBudgets as RunningBudgets
from vllm_operator.api.budgets import TokenBudgets as TokenBudgets
from vllm_operator.api.durations import Duration, parse_duration
from vllm_operator.api.envsource import EnvVarSource
from vllm_operator.api.resources import ResourcesSpec
from vllm_operator.constants import DEFAULT_IMAGE, VLLM_CACHE_HOME
from vllm_operator.vllm.dtypes import KvCacheDtype

EXTRA_ARGS_MAX_ITEMS: Final = 64
EXTRA_ARG_MAX_LENGTH: Final = 256
ENV_MAX_ITEMS: Final = 64
FALLBACK_TYPES_MAX_ITEMS: Final = 8
RULES_ERROR: Final = "vllmservice_rules"
# A C identifier, what a shell can export and every variable vLLM reads looks like.
ENV_NAME_PATTERN: Final = r"^[A-Za-z_][A-Za-z0-9_]*$"
# An absolute path of plain segments: no `//`, no trailing `/`, nothing a shell would expand
# (`.` and `..` segments are refused by a rule: RE2 has no lookahead).
MOUNT_PATH_PATTERN: Final = r"^(/[A-Za-z0-9._-]+)+$"
DNS_LABEL_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
NETWORK_POLICY_MAX_NAMESPACES: Final = 32

_VLLM_DEFAULT = "Omitted = vLLM's own default (the flag is not passed)."

GPUTypeName = Annotated[str, Field(min_length=1, max_length=63)]
ExtraArg = Annotated[str, Field(max_length=EXTRA_ARG_MAX_LENGTH)]
K8sName = Annotated[str, Field(min_length=1, max_length=253)]


class GPUSpec(SpecModel):
    type: GPUTypeName = Field(
        description=(
            "GPU type: a key of the operator's GPU catalog (e.g. H100-80GB, L4). It selects the "
            "device resource and the nodes. Unknown types are reported on the object's status."
        )
    )
    count: int = Field(
        default=1,
        ge=1,
        le=64,
        description=(
            "GPUs per replica. The tensor parallel size defaults to it "
            "(divided by spec.engine.pipelineParallelSize when that is set)."
        ),
    )
    fallback_types: list[GPUTypeName] = Field(
        default_factory=list,
        max_length=FALLBACK_TYPES_MAX_ITEMS,
        description=(
            "Other acceptable catalog GPU types, most preferred first. Pods may then land on any "
            "of spec.gpu.type and these; the scheduler prefers them in this order."
        ),
    )

    @property
    def acceptable_types(self) -> tuple[str, ...]:
        """spec.gpu.type, then the fallback types: most preferred first, each once."""
        return tuple(dict.fromkeys((self.type, *self.fallback_types)))


class Budgets(SpecModel):
    queue: QueueBudgets | None = Field(
        default=None, description="Entry valve: beyond these limits requests get HTTP 503."
    )
    running: RunningBudgets | None = Field(
        default=None, description="Running layer: how many sequences the engine runs."
    )
    tokens: TokenBudgets | None = Field(default=None, description="Token budget per engine step.")


class EnvVar(SpecModel):
    # Not both value and valueFrom: with `name` that is at most two properties.
    model_config = ConfigDict(json_schema_extra={"maxProperties": 2})

    name: str = Field(
        min_length=1,
        max_length=256,
        pattern=ENV_NAME_PATTERN,
        description="Variable name: letters, digits and '_', not starting with a digit.",
    )
    value: str | None = Field(
        default=None, max_length=32768, description="Literal value (not for secrets)."
    )
    value_from: EnvVarSource | None = Field(
        default=None,
        description="A Kubernetes EnvVarSource: secretKeyRef, configMapKeyRef, fieldRef or "
        "resourceFieldRef.",
    )

    @model_validator(mode="after")
    def _one_value(self) -> EnvVar:
        if self.value is not None and self.value_from is not None:
            raise ValueError("value and valueFrom are exclusive: give one")
        return self


class EngineSpec(SpecModel):
    max_model_len: int | None = Field(
        default=None,
        ge=1,
        description=f"Context length, prompt plus output (--max-model-len). {_VLLM_DEFAULT}",
    )
    gpu_memory_utilization: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description=(
            "Fraction of GPU memory vLLM may use, in (0, 1] (--gpu-memory-utilization). "
            f"{_VLLM_DEFAULT}"
        ),
    )
    enable_chunked_prefill: bool | None = Field(
        default=None,
        description=(
            "Split long prefills across steps (--enable-chunked-prefill / "
            "--disable-chunked-prefill). When false, maxBatchedTokens must be >= maxModelLen. "
            f"{_VLLM_DEFAULT}"
        ),
    )
    enable_prefix_caching: bool | None = Field(
        default=None,
        description=(
            "Automatic prefix caching (--enable-prefix-caching / --disable-prefix-caching). "
            f"{_VLLM_DEFAULT}"
        ),
    )
    scheduling_policy: Literal["fcfs", "priority"] | None = Field(
        default=None,
        description=(
            "fcfs, or priority (lower request `priority` runs first and may preempt) "
            f"(--scheduling-policy). {_VLLM_DEFAULT}"
        ),
    )
    kv_cache_dtype: KvCacheDtype | None = Field(
        default=None,
        description=(
            "KV cache data type, one of vLLM 0.33's (--kv-cache-dtype); float16 or bfloat16 "
            f"must be the dtype the model runs in. {_VLLM_DEFAULT}"
        ),
    )
    tensor_parallel_size: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Tensor parallel degree (--tensor-parallel-size). Defaults to spec.gpu.count divided "
            "by the pipeline parallel size; tensor x pipeline must equal spec.gpu.count."
        ),
    )
    pipeline_parallel_size: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Pipeline parallel degree (--pipeline-parallel-size); passed only when above 1. "
            "Defaults to 1."
        ),
    )
    extra_args: list[ExtraArg] = Field(
        default_factory=list,
        max_length=EXTRA_ARGS_MAX_ITEMS,
        description=(
            "More `vllm serve` arguments, appended last. May not repeat a flag that a typed field "
            "owns, nor knobs that vLLM 0.33 does not have; what its parser would exit on (a bad "
            "value, a missing or stray one) is reported on status and not rendered."
        ),
    )
    env: list[EnvVar] = Field(
        default_factory=list,
        max_length=ENV_MAX_ITEMS,
        description=(
            "Extra environment variables for the vLLM container, after the operator's own "
            "(a later entry of the same name wins). The HF token belongs in spec.hfTokenSecret."
        ),
    )


class SLOSpec(SpecModel):
    ttft_p95: Duration | None = Field(
        default=None, description="Target 95th percentile time to first token, e.g. 500ms."
    )
    itl_p95: Duration | None = Field(
        default=None, description="Target 95th percentile inter-token latency, e.g. 60ms."
    )
    max_rejection_ratio: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Largest acceptable share of requests refused with 503, in [0, 1].",
    )

    @property
    def ttft_p95_seconds(self) -> float | None:
        return None if self.ttft_p95 is None else parse_duration(self.ttft_p95)

    @property
    def itl_p95_seconds(self) -> float | None:
        return None if self.itl_p95 is None else parse_duration(self.itl_p95)


DEFAULT_FORECAST_PERIOD = 86400.0  # a day: the shape most serving traffic repeats


class AutoscalingSpec(SpecModel):
    enabled: bool = Field(
        default=False,
        description=(
            "Let the operator scale replicas between minReplicas and maxReplicas; "
            "spec.replicas is then only the initial count."
        ),
    )
    min_replicas: int = Field(
        default=1, ge=1, le=INT32_MAX, description="Fewest replicas when autoscaling."
    )
    max_replicas: int | None = Field(
        default=None,
        ge=1,
        le=INT32_MAX,
        description="Most replicas when autoscaling; required when enabled.",
    )
    forecast_period: Duration | None = Field(
        default=None,
        description=(
            "The period the traffic repeats with: the forecast reads the arrivals one period "
            "ago from Prometheus and, when the last minutes followed that shape, scales ahead "
            "of what came next then. Omitted: 24h (the daily shape); 0s turns it off."
        ),
    )

    @property
    def forecast_period_seconds(self) -> float | None:
        """Seconds of the traffic's period; None when turned off (0s)."""
        if self.forecast_period is None:
            return DEFAULT_FORECAST_PERIOD
        seconds = parse_duration(self.forecast_period)
        return seconds if seconds > 0 else None


class AutotuneSpec(SpecModel):
    mode: Literal["Off", "Recommend", "Auto"] = Field(
        default="Off",
        description=(
            "Off; Recommend (write proposed budgets to status only); Auto (apply them, which "
            'restarts pods). Quote "Off" in YAML: unquoted it reads as the boolean false.'
        ),
    )
    bounds: AutotuneBounds | None = Field(
        default=None, description="Per budget field, the range the tuner may use."
    )
    max_restarts_per_hour: int = Field(
        default=1,
        ge=0,
        le=60,
        description=(
            "Most budget changes per hour, each a restart of every pod; 0 freezes budgets. A"
            " rollback of a change that made things worse counts but is never held."
        ),
    )
    canary: bool = Field(
        default=False,
        description=(
            "Mode Auto: run each budget change on one extra canary pod first, judged against"
            " the other pods on the same traffic; promoted to every pod or removed."
        ),
    )

    @field_validator("mode", mode="before")
    @classmethod
    def _unquoted_off(cls, value: Any) -> Any:
        if value is False:
            raise PydanticCustomError(
                "unquoted_off",
                'got the boolean false: YAML reads an unquoted Off as false; write mode: "Off"',
            )
        return value


class MonitoringSpec(SpecModel):
    service_monitor: bool = Field(
        default=False, description="Create a Prometheus Operator ServiceMonitor for /metrics."
    )
    pod_monitor: bool = Field(
        default=False, description="Create a Prometheus Operator PodMonitor for /metrics."
    )
    interval: Duration | None = Field(
        default=None, description="Scrape interval; Prometheus' own default when omitted."
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Extra labels for the ServiceMonitor/PodMonitor, so that a Prometheus' monitor "
            "selector (e.g. release: kube-prometheus-stack) picks them up."
        ),
    )


class ModelCacheSpec(SpecModel):
    pvc_name: K8sName = Field(description="PersistentVolumeClaim that holds downloaded models.")
    mount_path: str = Field(
        default=f"{VLLM_CACHE_HOME}/huggingface",
        max_length=1024,
        pattern=MOUNT_PATH_PATTERN,
        description=(
            "Where the claim is mounted; HF_HOME points there. An absolute path, not / nor a "
            "system directory (/etc, /usr, /dev, ...) nor a path the operator mounts itself."
        ),
    )
    read_only: bool = Field(default=False, description="Mount read-only (for pre-staged weights).")


class CompileCacheSpec(SpecModel):
    enabled: bool = Field(
        default=True,
        description="Keep torch.compile artifacts (VLLM_CACHE_ROOT) on a volume.",
    )
    pvc_name: K8sName | None = Field(
        default=None,
        description=(
            "PersistentVolumeClaim for the cache, so it survives pod restarts; "
            "an emptyDir (container restarts only) when omitted."
        ),
    )


class SecretKeySelector(SpecModel):
    name: K8sName = Field(description="Secret name, in the VLLMService's namespace.")
    key: str = Field(
        default="token", min_length=1, max_length=253, description="Key in the Secret."
    )


class NetworkPolicySpec(SpecModel):
    from_namespaces: list[Annotated[str, Field(max_length=63, pattern=DNS_LABEL_PATTERN)]] = Field(
        min_length=1,
        max_length=NETWORK_POLICY_MAX_NAMESPACES,
        description=(
            "Namespaces whose pods may reach the vLLM port (the API and /metrics); list "
            "this VLLMService's own namespace and your Prometheus' to keep them."
        ),
    )


class VLLMServiceSpec(SpecModel):
    model: str = Field(
        min_length=1,
        max_length=1024,
        description="Model to serve: a Hugging Face id or a path (vllm serve's positional arg).",
    )
    served_model_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="Name clients use in requests (--served-model-name); the model id otherwise.",
    )
    image: str | None = Field(
        default=None,
        min_length=1,
        max_length=1024,
        description=f"Container image; the operator's default ({DEFAULT_IMAGE}) when omitted.",
    )
    replicas: int = Field(
        default=1,
        ge=0,
        le=INT32_MAX,
        description="Replicas when autoscaling is off; the initial count when it is on.",
    )
    gpu: GPUSpec = Field(description="GPUs each replica needs.")
    resources: ResourcesSpec | None = Field(
        default=None,
        description="CPU and host memory per replica; per-GPU catalog defaults when omitted.",
    )
    budgets: Budgets | None = Field(
        default=None,
        description="The three concurrency layers of vLLM; every field omitted = vLLM's default.",
    )
    engine: EngineSpec | None = Field(default=None, description="Other `vllm serve` settings.")
    slo: SLOSpec | None = Field(
        default=None, description="What good service means; the tuner steers toward it."
    )
    autoscaling: AutoscalingSpec | None = Field(
        default=None, description="Replica autoscaling by the operator."
    )
    autotune: AutotuneSpec | None = Field(
        default=None, description="Budget tuning from observed metrics."
    )
    monitoring: MonitoringSpec | None = Field(
        default=None, description="Prometheus Operator scrape objects."
    )
    model_cache: ModelCacheSpec | None = Field(
        default=None, description="A volume for model weights, shared across restarts."
    )
    compile_cache: CompileCacheSpec | None = Field(
        default=None, description="A volume for torch.compile artifacts: faster restarts."
    )
    hf_token_secret: SecretKeySelector | None = Field(
        default=None, description="Secret key holding the Hugging Face token (sets HF_TOKEN)."
    )
    api_key_secret: SecretKeySelector | None = Field(
        default=None,
        description=(
            "Secret key holding the API key clients must send as a Bearer token on /v1 (sets "
            "VLLM_API_KEY; /health and /metrics stay open)."
        ),
    )
    network_policy: NetworkPolicySpec | None = Field(
        default=None,
        description=(
            "A NetworkPolicy that admits ingress to the pods only from the listed namespaces; "
            "none when omitted."
        ),
    )

    @model_validator(mode="after")
    def _cross_field_rules(self) -> VLLMServiceSpec:
        raise_broken(rules.broken_rules(self, ("spec",)))
        return self


def raise_broken(messages: list[str]) -> None:
    """One error carrying every broken rule: the formatter prints each message on its own line."""
    if messages:
        raise PydanticCustomError(
            RULES_ERROR, "{joined}", {"joined": "; ".join(messages), "messages": messages}
        )
