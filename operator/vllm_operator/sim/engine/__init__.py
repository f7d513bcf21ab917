"""The vLLM 0.33 engine model: pure, deterministic, driven by virtual time passed in."""

from vllm_operator.sim.engine.config import EngineConfig, ResolvedConfig, resolve_config
from vllm_operator.sim.engine.engine import Engine
from vllm_operator.sim.engine.profiles import GpuProfile, ModelProfile, StepCoefficients
from vllm_operator.sim.engine.request import (
    MAX_N_SEQUENCES,
    InvalidRequestError,
    Rejected,
    RequestEvent,
    RequestRecord,
    SimRequest,
)
from vllm_operator.sim.engine.stats import EngineStats
from vllm_operator.sim.engine.steptime import ConstantStepTime, StepTimeModel

__all__ = [
    "MAX_N_SEQUENCES",
    "ConstantStepTime",
    "Engine",
    "EngineConfig",
    "EngineStats",
    "GpuProfile",
    "InvalidRequestError",
    "ModelProfile",
    "Rejected",
    "RequestEvent",
    "RequestRecord",
    "ResolvedConfig",
    "SimRequest",
    "StepCoefficients",
    "StepTimeModel",
    "resolve_config",
]
