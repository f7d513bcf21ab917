"""What a VLLMService may not carry unless the operator's policy allows it (docs/security.md §2).

A deny list of `vllm serve` flags and environment variables that change where vLLM listens, who
may call it, what code it loads or which files it reads, and an optional allow list of images.
A cluster that needs one of them names it in the operator config (chart values `config.policy`);
the policy is the operator's, not the CRD's, so it is enforced where the config is known: by the
renderer, before anything is applied (status says why nothing was rendered), and by the
ValidatingAdmissionPolicy the chart renders from policy_file_yaml() minus the allow lists. A
denied flag is found in every spelling vLLM accepts (vllm_operator.vllm.options).
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from typing import Any, Final

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from vllm_operator.api.flags import extra_arg_field
from vllm_operator.vllm.options import load_option_table, resolve_token, resolving_pattern

POLICY_DOC: Final = "docs/security.md §2"


@dataclass(frozen=True)
class Denied:
    name: str  # a canonical vLLM flag, or an environment variable
    why: str  # completes "it ..."


_LISTEN = "changes where or how vLLM listens, which the probes, the Service and Prometheus rely on"
_TLS = "switches port 8000 to TLS, which the probes, the clients and Prometheus do not speak"
_CORS = "opens the API to scripts of other web origins (CORS)"
_CLASS = "imports and runs a Python class named in the spec"
_PLUGIN = "imports and runs Python code from a file named in the spec"
_LOADER = "makes every process load other native libraries or Python modules"

DENIED_FLAGS: Final[tuple[Denied, ...]] = (
    Denied("--host", _LISTEN),
    Denied("--uds", _LISTEN),
    Denied("--root-path", "moves the API under a path prefix meant for a proxy in front of it"),
    *(
        Denied(flag, _TLS)
        for flag in (
            "--ssl-keyfile",
            "--ssl-certfile",
            "--ssl-ca-certs",
            "--ssl-cert-reqs",
            "--ssl-ciphers",
            "--enable-ssl-refresh",
        )
    ),
    *(
        Denied(flag, _CORS)
        for flag in ("--allowed-origins", "--allowed-methods", "--allowed-headers")
    ),
    Denied("--allow-credentials", _CORS),
    Denied("--trust-remote-code", "runs Python code from the model's repository"),
    Denied("--middleware", _CLASS),
    Denied("--worker-cls", _CLASS),
    Denied("--worker-extension-cls", _CLASS),
    Denied("--scheduler-cls", _CLASS),
    Denied("--logits-processors", _CLASS),
    Denied("--tool-parser-plugin", _PLUGIN),
    Denied("--reasoning-parser-plugin", _PLUGIN),
    Denied("--io-processor-plugin", "loads an IO processor plugin named in the spec"),
    Denied("--config", "reads more flags from a file, past every extraArgs rule"),
    Denied("--log-config-file", "reads a logging config, which can construct any Python class"),
    Denied("--allowed-local-media-path", "lets requests read files of the pod"),
)

DENIED_ENV: Final[tuple[Denied, ...]] = (
    *(Denied(name, _LOADER) for name in ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT")),
    *(Denied(name, _LOADER) for name in ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE")),
    Denied("VLLM_PORT", "changes the ports vLLM's processes use among themselves"),
    Denied("VLLM_HOST_IP", "changes the address vLLM's processes use among themselves"),
    Denied(
        "VLLM_LOGGING_CONFIG_PATH", "reads a logging config, which can construct any Python class"
    ),
    Denied("VLLM_ALLOW_INSECURE_SERIALIZATION", "lets vLLM's processes unpickle messages"),
)

_FLAGS_BY_NAME: Final = {d.name: d for d in DENIED_FLAGS}
_ENV_BY_NAME: Final = {d.name: d for d in DENIED_ENV}


def _listed(kind: str, allowed: list[str], known: dict[str, Denied]) -> list[str]:
    for index, name in enumerate(allowed):
        if name not in known:
            raise ValueError(
                f"[{index}] {name!r} is not a denied {kind}, so it needs no allowing; "
                f"denied: {', '.join(known)}"
            )
    return allowed


class PolicyConfig(BaseModel):
    """Operator config `policy`: what this cluster allows beyond the defaults."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    allowed_flags: list[str] = Field(
        default_factory=list,
        description="Denied vLLM flags (canonical spelling, e.g. --trust-remote-code) to allow.",
    )
    allowed_env: list[str] = Field(
        default_factory=list, description="Denied environment variables to allow."
    )
    allowed_images: list[str] = Field(
        default_factory=list,
        description=(
            "Image patterns (shell globs, e.g. vllm/vllm-openai:*) a VLLMService may run; "
            "any image when empty."
        ),
    )

    @field_validator("allowed_flags")
    @classmethod
    def _known_flags(cls, value: list[str]) -> list[str]:
        return _listed("flag", value, _FLAGS_BY_NAME)

    @field_validator("allowed_env")
    @classmethod
    def _known_env(cls, value: list[str]) -> list[str]:
        return _listed("environment variable", value, _ENV_BY_NAME)

    @field_validator("allowed_images")
    @classmethod
    def _plain_globs(cls, value: list[str]) -> list[str]:
        for index, pattern in enumerate(value):
            if not pattern or "[" in pattern or "]" in pattern:
                raise ValueError(
                    f"[{index}] {pattern!r}: give a non-empty pattern with * and ? only "
                    "(the admission policy turns it into a regex)"
                )
        return value

    def image_allowed(self, image: str) -> bool:
        return not self.allowed_images or any(fnmatchcase(image, p) for p in self.allowed_images)


def _is_negative(option: str, denied: Denied) -> bool:
    """`--no-trust-remote-code` turns the risk off: a negative of a denied switch is harmless."""
    return option != denied.name and option.startswith(("--no-", "--disable-"))


def denied_flag_pattern(denied: Denied) -> str:
    """RE2 regex (no backslashes) of the tokens vLLM reads as `denied`, negatives left out: the
    admission policy's twin of _denied_flag_of (a property test keeps them equal)."""
    table = load_option_table()
    action = table.by_string[denied.name]
    positive = tuple(s for s in action.strings if not _is_negative(s, denied))
    return resolving_pattern(action.dest, table, positive)


def flag_refusal(denied: Denied) -> str:
    return (
        f"is vLLM's {denied.name}, which the operator's policy denies: it {denied.why}; "
        f"a cluster admin may allow it in policy.allowedFlags ({POLICY_DOC})"
    )


def env_refusal(denied: Denied) -> str:
    return (
        f"is denied by the operator's policy: it {denied.why}; a cluster admin may allow it in "
        f"policy.allowedEnv ({POLICY_DOC})"
    )


@dataclass(frozen=True)
class Violation:
    field: str
    message: str  # what follows "FIELD: "


@cache
def _denied_by_dest() -> dict[str, Denied]:
    table = load_option_table()
    return {table.by_string[d.name].dest: d for d in DENIED_FLAGS}


def _denied_flag_of(token: str, allowed: frozenset[str]) -> Denied | None:
    """The denied flag vLLM reads `token` as (any spelling), unless it is that flag's negative
    (`--no-trust-remote-code` turns the risk off) or the policy allows it."""
    table = load_option_table()
    option = resolve_token(token, table).option
    if option is None:
        return None
    denied = _denied_by_dest().get(table.by_string[option].dest)
    if denied is None or denied.name in allowed or _is_negative(option, denied):
        return None
    return denied


def find_policy_violations(spec: Any, policy: PolicyConfig, image: str) -> list[Violation]:
    """Every setting of `spec` the policy refuses, each naming its field; [] when it complies."""
    found: list[Violation] = []
    if not policy.image_allowed(image):
        found.append(
            Violation(
                "spec.image",
                f"{image!r} is not allowed by the operator's policy.allowedImages "
                f"({', '.join(policy.allowed_images)}); use an allowed image",
            )
        )
    engine = spec.engine
    if engine is None:
        return found
    allowed_flags = frozenset(policy.allowed_flags)
    for index, token in enumerate(engine.extra_args):
        denied = _denied_flag_of(token, allowed_flags)
        if denied is not None:
            found.append(
                Violation(
                    extra_arg_field(index),
                    f'"{token}" {flag_refusal(denied)}',
                )
            )
    for index, env in enumerate(engine.env):
        if env.name in _ENV_BY_NAME and env.name not in policy.allowed_env:
            found.append(
                Violation(
                    f"spec.engine.env[{index}].name",
                    f"{env.name} {env_refusal(_ENV_BY_NAME[env.name])}",
                )
            )
    return found


POLICY_FILENAME: Final = "policy.yaml"


def policy_file_yaml() -> str:
    """The deny lists as the chart's ValidatingAdmissionPolicy reads them (files/policy.yaml):
    each flag with the regex of its spellings and the message, each variable with its message."""
    data = {
        "flags": [
            {
                "name": d.name,
                "pattern": denied_flag_pattern(d),
                "message": f"spec.engine.extraArgs: an element {flag_refusal(d)}",
            }
            for d in DENIED_FLAGS
        ],
        "env": [
            {"name": d.name, "message": f"spec.engine.env: {d.name} {env_refusal(d)}"}
            for d in DENIED_ENV
        ],
    }
    header = (
        "# Generated from vllm_operator.api.policy by `python -m vllm_operator.tools.gen_crds`;"
        " do not edit.\n"
    )
    return header + yaml.safe_dump(data, sort_keys=False, width=1000, allow_unicode=True)
