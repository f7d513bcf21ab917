"""`vllm serve`'s checks of its parsed arguments before it loads anything (vLLM 0.33).

vllm/entrypoints/cli/serve.py `ServeSubcommand.validate` runs `validate_parsed_serve_args`
(vllm/entrypoints/common/cli_args.py) on what argparse parsed, and `vllm serve` dies with its
message on the first that fails, before any engine config is built: a chat template that looks
like a path and is none, `--grpc-port` without the Rust frontend, a `--reasoning-effort-map`
that is not a JSON object of strings keyed by efforts, `--enable-auto-tool-choice` without
`--tool-call-parser`, and the like. `serve_problem` runs the same checks in the same order on
the values a caller reads (`value(dest)`, vLLM's default where the argv left one unset). One
check comes later in vLLM, when EngineArgs.create_engine_config builds the engine's config, and
still before anything loads: with `--fail-on-environ-validation`, a `VLLM_*` variable that
vLLM does not define stops it (Platform.validate_environ).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from vllm_operator.vllm.env import unknown_variables

# vllm/transformers_utils/chat_templates/ in vLLM 0.33.0: a bare name may be one of these
BUILTIN_CHAT_TEMPLATES: Final = frozenset(
    {
        "template_basic.jinja",
        "template_blip2.jinja",
        "template_chatml.jinja",
        "template_deepseek_ocr.jinja",
        "template_deepseek_vl2.jinja",
        "template_kimi_audio.jinja",
        "template_minicpmv45.jinja",
    }
)
# vllm.renderers.ReasoningEffort, the keys --reasoning-effort-map may use
REASONING_EFFORTS: Final = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
RUST_FRONTEND: Final = "VLLM_USE_RUST_FRONTEND"

Value = Callable[[str], Any]


def serve_problem(value: Value, env: Mapping[str, str], *, local_files: bool) -> str | None:
    """The message `vllm serve` dies with for these parsed values; None where it goes on.

    `local_files`: the caller runs where vLLM would, so a chat template path can be looked up
    (the twin); the operator cannot see the pod's files (a mounted template), and skips that."""
    checks = (_grpc_port, _effort_map, _pairs, _multi_port_lb, _environ)
    for check in (_chat_template, *checks) if local_files else checks:
        problem = check(value, env)
        if problem is not None:
            return problem
    return None


def _chat_template(value: Value, env: Mapping[str, str]) -> str | None:
    """validate_chat_template: text with no Jinja characters must name a file."""
    template = value("chat_template")
    if not isinstance(template, str) or any(c in template for c in "{}\n"):
        return None
    if template in BUILTIN_CHAT_TEMPLATES or Path(template).exists():
        return None
    return (
        f"The supplied chat template string ({template}) appears path-like, but doesn't exist! "
        "(parameter=chat_template)"
    )


def _grpc_port(value: Value, env: Mapping[str, str]) -> str | None:
    """validate_grpc_port_arg: the Rust frontend's gRPC listener."""
    port = value("grpc_port")
    if port is None:
        return None
    if value("grpc"):
        return (
            "--grpc and --grpc-port are mutually exclusive. Use --grpc --port for the Python "
            "gRPC server, or VLLM_USE_RUST_FRONTEND=1 with --grpc-port for the Rust frontend."
        )
    if not _int_flag(env.get(RUST_FRONTEND)):
        return "--grpc-port requires VLLM_USE_RUST_FRONTEND=1 vllm serve"
    servers = value("api_server_count")
    if value("headless") or (servers is not None and servers <= 0):
        return (
            "--grpc-port requires a Rust frontend; remove --headless and non-positive "
            "--api-server-count"
        )
    if value("data_parallel_multi_port_external_lb"):
        return (
            "--grpc-port is incompatible with --data-parallel-multi-port-external-lb: its "
            "frontends would share the same gRPC port"
        )
    if not 0 <= port <= 65535:
        return "--grpc-port must be between 0 and 65535"
    if port != 0 and port == value("port") and not value("uds"):
        return "--grpc-port must differ from --port when HTTP uses TCP"
    return None


def _effort_map(value: Value, env: Mapping[str, str]) -> str | None:
    """validate_reasoning_effort_map."""
    efforts = value("reasoning_effort_map")
    if efforts is None:
        return None
    if not isinstance(efforts, dict) or not all(isinstance(v, str) for v in efforts.values()):
        return (
            "Error: --reasoning-effort-map must be a JSON object mapping reasoning efforts to "
            "strings."
        )
    unknown = sorted(set(efforts) - set(REASONING_EFFORTS))
    if unknown:
        return (
            f"Error: --reasoning-effort-map has unknown efforts {unknown}; keys must be one of "
            f"{list(REASONING_EFFORTS)}."
        )
    return None


def _pairs(value: Value, env: Mapping[str, str]) -> str | None:
    """The flags that need another one."""
    if value("enable_auto_tool_choice") and not value("tool_call_parser"):
        return "Error: --enable-auto-tool-choice requires --tool-call-parser"
    if value("enable_log_outputs") and not value("enable_log_requests"):
        return "Error: --enable-log-outputs requires --enable-log-requests"
    if (value("sse_keep_alive_interval") or 0) < 0:
        return (
            "Error: --sse-keep-alive-interval must be a non-negative integer (0 disables "
            "keep-alive comments)."
        )
    if value("enable_per_request_metrics") and value("disable_log_stats"):
        return (
            "Error: --enable-per-request-metrics requires engine statistics logging; remove "
            "--disable-log-stats to enable per-request metrics."
        )
    return None


def _multi_port_lb(value: Value, env: Mapping[str, str]) -> str | None:
    """validate_multi_port_external_lb_args (vllm/entrypoints/launchers/dp_supervisor.py)."""
    if not value("data_parallel_multi_port_external_lb"):
        return None
    flag = "--data-parallel-multi-port-external-lb"
    size, local = value("data_parallel_size"), value("data_parallel_size_local")
    problems = (
        (value("grpc"), f"Error: {flag} does not support --grpc"),
        (value("uds") is not None, f"Error: {flag} does not support --uds"),
        (
            bool(value("ssl_keyfile")) != bool(value("ssl_certfile")),
            "Error: --ssl-keyfile and --ssl-certfile must be provided together",
        ),
        (
            value("api_server_count") not in (None, 1),
            f"Error: {flag} currently requires --api-server-count=1",
        ),
        (
            value("data_parallel_rank") is not None,
            f"Error: {flag} manages child --data-parallel-rank values internally",
        ),
        (
            value("data_parallel_external_lb") or value("data_parallel_hybrid_lb"),
            f"Error: {flag} cannot be combined with --data-parallel-external-lb or "
            "--data-parallel-hybrid-lb",
        ),
        (size < 2, f"Error: {flag} requires --data-parallel-size > 1"),
        (local is None or local < 2, f"Error: {flag} requires --data-parallel-size-local >= 2"),
        (
            local is not None and local > size,
            "Error: --data-parallel-size-local cannot exceed --data-parallel-size",
        ),
        (
            local is not None and size % local != 0,
            "Error: --data-parallel-size must be divisible by --data-parallel-size-local",
        ),
    )  # then the ranks' and the supervisor's ports, which a pod's argv leaves to vLLM
    return next((message for failed, message in problems if failed), None)


def _int_flag(text: str | None) -> bool:
    """vllm/envs.py reads the variable as bool(int(...)); what is not an integer is not on."""
    try:
        return int(text or "0") != 0
    except ValueError:
        return False


def _environ(value: Value, env: Mapping[str, str]) -> str | None:
    """Platform.validate_environ (vllm/platforms/interface.py) with hard_fail."""
    unknown = unknown_variables(env)
    if not value("fail_on_environ_validation") or not unknown:
        return None
    return f"Unknown vLLM environment variable detected: {unknown[0]}"
