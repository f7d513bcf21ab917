"""From parsed `vllm serve` args to a ready engine: profiles, model choice, vLLM's validation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vllm_operator.sim.catalog import Catalog, load_catalog
from vllm_operator.sim.engine import Engine
from vllm_operator.sim.engine.profiles import ProfileError
from vllm_twin.argv import TwinArgs, choose_model_profile
from vllm_twin.server.state import ServeOptions


class TwinSetupError(Exception):
    """The twin's own configuration is wrong (profiles, GPU or model name): not a vLLM error."""


@dataclass(frozen=True)
class EngineSetup:
    engine: Engine
    gpu: str
    model_profile: str

    def describe(self) -> str:
        r = self.engine.resolved
        return (
            f"gpu {self.gpu}, profile {self.model_profile}, max_num_seqs {r.max_num_seqs}, "
            f"max_num_batched_tokens {r.max_num_batched_tokens}, max_model_len "
            f"{r.max_model_len}, {r.num_gpu_blocks} KV blocks"
        )


def profile_names(catalog: Catalog) -> Mapping[str, str]:
    """Every profile name and declared HF alias → the profile name."""
    names = {name: name for name in catalog.models}
    for name, model in catalog.models.items():
        names.update(dict.fromkeys(model.aliases, name))
    return names


def build_engine(args: TwinArgs) -> EngineSetup:
    """Raises TwinSetupError for the twin's own settings, ValueError with vLLM's startup message."""
    try:
        catalog = load_catalog(args.sim_profiles)
    except ProfileError as exc:
        raise TwinSetupError(str(exc)) from None
    if args.gpu not in catalog.gpus:
        raise TwinSetupError(
            f"unknown GPU profile {args.gpu!r} (--gpu / VLLM_TWIN_GPU); "
            f"known: {', '.join(sorted(catalog.gpus))}"
        )
    try:
        model_name = choose_model_profile(args.model, args.sim_model, profile_names(catalog))
    except ValueError as exc:
        raise TwinSetupError(str(exc)) from None
    engine = Engine(
        args.engine,
        catalog.gpus[args.gpu],
        catalog.models[model_name],
        seed=args.sim_seed,
        coeffs=catalog.coefficients,
    )
    return EngineSetup(engine, args.gpu, model_name)


def serve_options_from(args: TwinArgs) -> ServeOptions:
    """What the HTTP layer needs from the parsed command line."""
    return ServeOptions(
        model=args.model,
        served_model_names=args.served_model_names,
        time_scale=args.time_scale,
        disable_log_stats=args.disable_log_stats,
        stream_interval=args.stream_interval,
        api_keys=args.api_keys,
    )
