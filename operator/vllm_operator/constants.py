"""Names other tools rely on (docs/architecture.md §4.2): API coordinates, labels, managers."""

from typing import Final

GROUP: Final = "serving.vllmop.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "VLLMService"
PLURAL: Final = "vllmservices"
SINGULAR: Final = "vllmservice"
SHORT_NAME: Final = "vllmsvc"

VLLM_VERSION: Final = "0.33.0"
DEFAULT_IMAGE: Final = f"vllm/vllm-openai:v{VLLM_VERSION}"
VLLM_PORT: Final = 8000
# The vLLM container's HOME: a writable volume (the root filesystem is read-only), the parent of
# every cache vLLM, Hugging Face, torch and Triton write (~/.cache, ~/.config, ~/.triton).
VLLM_HOME: Final = "/home/vllm"
VLLM_CACHE_HOME: Final = f"{VLLM_HOME}/.cache"
VLLM_CACHE_ROOT: Final = f"{VLLM_CACHE_HOME}/vllm"  # the compile cache's mount
TMP_PATH: Final = "/tmp"  # a writable emptyDir, as HOME is

# Labels (docs/architecture.md §4.2).
LABEL_NAME: Final = "app.kubernetes.io/name"
LABEL_INSTANCE: Final = "app.kubernetes.io/instance"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
LABEL_SERVICE: Final = f"{GROUP}/vllmservice"
LABEL_SPEC_HASH: Final = f"{GROUP}/spec-hash"
LABEL_CANARY: Final = f"{GROUP}/canary"  # "true" on a canary pod (tuning/canary.py)
MANAGED_BY: Final = "vllm-operator"

# Server-side apply field managers, one per concern (cert-manager scheme).
FM_RENDERER: Final = "vllm-operator-renderer"
FM_TUNER: Final = "vllm-operator-tuner"
FM_STATUS: Final = "vllm-operator-status"

# Condition types.
COND_READY: Final = "Ready"
COND_PROGRESSING: Final = "Progressing"
COND_DEGRADED: Final = "Degraded"
COND_STALLED: Final = "Stalled"  # kstatus' Failed: Degraded for a cause that needs a person
COND_TUNING_ACTIVE: Final = "TuningActive"

# Condition reasons (CamelCase, one per distinct cause; troubleshooting docs are keyed by them).
REASON_AVAILABLE: Final = "ReplicasAvailable"
REASON_NOT_READY: Final = "ReplicasNotReady"
REASON_ROLLING_OUT: Final = "RollingOut"
REASON_STABLE: Final = "RolloutComplete"
REASON_UNSCHEDULABLE: Final = "Unschedulable"
REASON_CRASH_LOOP: Final = "CrashLoopBackOff"
REASON_UNKNOWN_GPU: Final = "UnknownGPUType"
REASON_INVALID_SPEC: Final = "InvalidSpec"
REASON_POLICY_DENIED: Final = "PolicyDenied"
REASON_DEADLINE: Final = "ProgressDeadlineExceeded"
REASON_SCALED_TO_ZERO: Final = "ScaledToZero"
REASON_HEALTHY: Final = "AsExpected"
REASON_APPLY_FAILED: Final = "ApplyFailed"
REASON_SPEC_WARNING: Final = "SpecWarning"  # Event: a legal but probably unintended setting
REASON_NO_SPARE_GPU: Final = "RolloutWithoutSpareGPU"  # Event: a rollout that cannot surge
LABEL_APPLIED_HASH: Final = f"{GROUP}/applied-hash"  # annotation: hash of the applied manifest
