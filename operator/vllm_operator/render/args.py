"""`vllm serve` container args, in one documented, deterministic order.

    MODEL
    --served-model-name         spec.servedModelName            (when set)
    --port 8000                 always: probes, the Service and the monitors rely on it
    --shutdown-timeout 60       always: a pod drains its requests on SIGTERM (render/rollout.py)
    --tensor-parallel-size      spec.engine.tensorParallelSize, else gpu.count / pipeline size
    --pipeline-parallel-size    when above 1
    --max-model-len             spec.engine.maxModelLen          (when set, same below)
    --gpu-memory-utilization    spec.engine.gpuMemoryUtilization
    --kv-cache-dtype            spec.engine.kvCacheDtype
    --enable-chunked-prefill | --disable-chunked-prefill    spec.engine.enableChunkedPrefill
    --enable-prefix-caching  | --disable-prefix-caching     spec.engine.enablePrefixCaching
    --scheduling-policy         spec.engine.schedulingPolicy
    --max-num-queued-reqs       budgets.queue.maxRequests        } the three layers, entry valve
    --max-num-queued-tokens     budgets.queue.maxPrefillTokens   } first; a tuning override
    --max-num-seqs              budgets.running.maxSeqs          } replaces the spec value
    --max-num-active-seqs       budgets.running.maxActiveSeqs    }
    --max-num-batched-tokens    budgets.tokens.maxBatchedTokens  }
    spec.engine.extraArgs       verbatim, last; none may resolve to an owned flag

Values are separate argv items (`--flag`, `value`); booleans are bare flags. Unset fields are
omitted, so vLLM applies its own defaults.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from pydantic import ValidationError

from vllm_operator.api import flags
from vllm_operator.api.budgets import BUDGET_FIELDS
from vllm_operator.api.errors import format_validation_error
from vllm_operator.api.rules import argv_safe
from vllm_operator.api.spec import EngineSpec, VLLMServiceSpec
from vllm_operator.api.status import BudgetValues
from vllm_operator.constants import VLLM_PORT
from vllm_operator.render.errors import RenderError
from vllm_operator.render.rollout import SHUTDOWN_TIMEOUT_S
from vllm_operator.vllm.rewrite import is_level_pair
from vllm_operator.vllm.serve_checks import RUST_FRONTEND, serve_problem
from vllm_operator.vllm.values import first_refusal, namespace_reader

NO_OVERRIDES: Final = BudgetValues()


def apply_overrides(spec: VLLMServiceSpec, overrides: BudgetValues) -> VLLMServiceSpec:
    """The spec with tuned budgets in place, validated by the same rules as user input.

    The tuner should never propose values that break a rule, but pods that crash-loop on a bad
    flag combination are too costly to trust that: a broken combination is a RenderError.
    """
    data = spec.model_dump(by_alias=True, exclude_none=True)
    changed = False
    for field in BUDGET_FIELDS:
        value = getattr(overrides, field.attr)
        if value is not None:
            group = data.setdefault("budgets", {}).setdefault(field.group, {})
            group[field.key] = value
            changed = True
    if not changed:
        return spec
    try:
        return VLLMServiceSpec.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(format_validation_error(exc, prefix=("spec",)))
        raise RenderError(
            "status.tuning.overrides", f"tuned budgets break a rule: {problems}"
        ) from None


def compute_parallel_sizes(spec: VLLMServiceSpec) -> tuple[int, int]:
    """(tensor, pipeline) parallel sizes; their product is spec.gpu.count (a spec rule)."""
    engine = spec.engine or EngineSpec()
    pp = engine.pipeline_parallel_size or 1
    tp = engine.tensor_parallel_size or max(1, spec.gpu.count // pp)
    return tp, pp


def compute_effective_budgets(spec: VLLMServiceSpec) -> BudgetValues:
    """Budget values the args carry (None = flag omitted, vLLM's default)."""
    budgets = spec.budgets
    values: dict[str, Any] = {}
    for field in BUDGET_FIELDS:
        group = None if budgets is None else getattr(budgets, field.group)
        values[field.attr] = None if group is None else getattr(group, field.attr)
    return BudgetValues(**values)


def _bool_flag(value: bool | None, on: str, off: str) -> list[str]:
    if value is None:
        return []
    return [on if value else off]


def _opt(flag: str, value: object) -> list[str]:
    return [] if value is None else [flag, str(value)]


def build_args(spec: VLLMServiceSpec) -> list[str]:
    """Container args for a (possibly overridden) spec, in the module docstring's order."""
    engine = spec.engine or EngineSpec()
    tp, pp = compute_parallel_sizes(spec)
    args = [_checked_name("spec.model", spec.model)]
    served = spec.served_model_name
    served = None if served is None else _checked_name("spec.servedModelName", served)
    args += _opt(flags.FLAG_SERVED_MODEL_NAME, served)
    args += [flags.FLAG_PORT, str(VLLM_PORT)]
    args += [flags.FLAG_SHUTDOWN_TIMEOUT, str(SHUTDOWN_TIMEOUT_S)]
    args += [flags.FLAG_TP, str(tp)]
    if pp > 1:
        args += [flags.FLAG_PP, str(pp)]
    args += _opt(flags.FLAG_MAX_MODEL_LEN, engine.max_model_len)
    # repr() is the shortest text that reads back as the same float (0.9, not 0.90000000000000002).
    gpu_mem = engine.gpu_memory_utilization
    args += _opt(flags.FLAG_GPU_MEM, None if gpu_mem is None else repr(gpu_mem))
    args += _opt(flags.FLAG_KV_CACHE_DTYPE, engine.kv_cache_dtype)
    args += _bool_flag(
        engine.enable_chunked_prefill, flags.FLAG_CHUNKED_PREFILL, flags.FLAG_NO_CHUNKED_PREFILL
    )
    args += _bool_flag(
        engine.enable_prefix_caching, flags.FLAG_PREFIX_CACHING, flags.FLAG_NO_PREFIX_CACHING
    )
    args += _opt(flags.FLAG_SCHEDULING_POLICY, engine.scheduling_policy)
    budgets = compute_effective_budgets(spec)
    for field in BUDGET_FIELDS:
        args += _opt(field.flag, getattr(budgets, field.attr))
    args += checked_extra_args(engine.extra_args)
    check_serve(args[1:], _known_env(engine))
    return args


def _known_env(engine: EngineSpec) -> dict[str, str]:
    """The pod's variables as far as the spec says: one set from a Secret or ConfigMap
    (valueFrom) may hold anything, so its value is "" (the Rust frontend's is taken as on)."""
    env = {var.name: "" if var.value is None else var.value for var in engine.env}
    if any(var.name == RUST_FRONTEND and var.value is None for var in engine.env):
        env[RUST_FRONTEND] = "1"
    return env


def check_serve(tokens: list[str], env: dict[str, str]) -> None:
    """`vllm serve`'s own checks of the parsed args after the model, with the pod's `env`
    (vllm_operator.vllm.serve_checks): vLLM exits on them before it loads anything, so the pod
    would only crash-loop. A chat template path is not looked up: the pod's files are not the
    operator's."""
    problem = serve_problem(namespace_reader(tokens), env, local_files=False)
    if problem is not None:
        raise RenderError(
            "spec.engine.extraArgs",
            f"vLLM 0.33's `vllm serve` would exit on the args ({problem}); fix or remove the "
            "extraArgs (or spec.engine.env entries) that cause it",
        )


NEGATIVE_DECIMAL = re.compile(r"^-\d*\.\d+$")


def checked_extra_args(extra_args: list[str]) -> list[str]:
    """extraArgs, refused when vLLM would read one as an owned flag, in any spelling, or would
    exit on them: no such flag, a value its parser refuses, a missing or stray value.

    The API refuses such specs already; the renderer checks again because it is the last place
    before the pod, whatever path the spec took (tuned overrides, unvalidated input).
    """
    for index, token in enumerate(extra_args):
        if is_level_pair(extra_args, index):
            continue
        if NEGATIVE_DECIMAL.match(token):
            raise RenderError(
                flags.extra_arg_field(index),
                f'"{token}": vLLM 0.33 reads a bare negative decimal as a dotted option (its '
                "parser's `--a.b` rewrite), which takes the next argument as its value; write "
                f"it after `=` (--flag={token})",
            )
        problem = flags.extra_arg_problem(token)
        if problem is not None:
            raise RenderError(flags.extra_arg_field(index), f'"{token}"{problem}')
    refusal = first_refusal(list(extra_args))
    if refusal is not None:
        token = extra_args[refusal.index]
        raise RenderError(
            flags.extra_arg_field(refusal.index),
            f"{json.dumps(token, ensure_ascii=False)}: vLLM 0.33 would exit on it "
            f"({refusal.message}); fix or remove it",
        )
    return list(extra_args)


def _checked_name(field: str, value: str) -> str:
    if not argv_safe(value):
        raise RenderError(field, f"{value!r} would not be read as one plain argument by vLLM")
    return value
