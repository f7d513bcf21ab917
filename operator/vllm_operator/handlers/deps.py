"""What handlers need from the world, built once at start-up and passed through kopf's memo."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from vllm_operator.config import OperatorConfig, load_operator_config
from vllm_operator.k8s.client import Kube, KubeClient, build_api_client
from vllm_operator.k8s.versions import NewestCopies
from vllm_operator.metrics.prometheus import PrometheusClientLike, build_prometheus
from vllm_operator.render.memo import RenderMemo
from vllm_operator.sim.catalog import Catalog, load_catalog
from vllm_operator.tuning.look_budget import LookBudget, look_budget_of
from vllm_operator.tuning.model_capacity import CapacityCache


def utc_now() -> datetime:
    return datetime.now(UTC)


class InlineExecutor(Executor):
    """Runs what is submitted at once, on the caller's thread: passes then stay one sequence of
    requests (tests, the benchmarks' replays) where the operator spreads them over pools."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        done: Future[Any] = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to the caller through the future, as a pool does
            done.set_exception(exc)
        return done


@dataclass
class Deps:
    cfg: OperatorConfig
    kube: Kube
    prometheus: PrometheusClientLike | None = None
    clock: Callable[[], datetime] = field(default=utc_now)
    # children a pass applies side by side (no child waits on another's slow create)
    children: Executor = field(default_factory=InlineExecutor)
    # Services, a few at a time: their creates queue in the API server (handlers/children.py)
    service_applies: Executor = field(default_factory=InlineExecutor)
    # Events, posted off the pass in the order submitted (an Event is not state)
    events: Executor = field(default_factory=InlineExecutor)
    # the engine profiles and the one cache of model capacities every service's pass shares
    catalog: Catalog = field(default_factory=load_catalog)
    capacity_cache: CapacityCache = field(default_factory=CapacityCache)
    # the CPU a minute rule 9b's looks may spend over every service (tuning/look_budget.py);
    # build_deps sizes it from cfg, the default is OperatorConfig's
    look_budget: LookBudget = field(default_factory=lambda: look_budget_of(OperatorConfig()))
    # the newest Deployment a pass has used or the Deployment watch has seen: a pass uses it
    # instead of an older event's, and of what it applied when that is older
    deployments: NewestCopies = field(default_factory=lambda: NewestCopies(shared=True))
    # the newest copy of each VLLMService (watch events, status writes): status passes and the
    # resync read it instead of the API server (handlers/cached_parent.py)
    services: NewestCopies = field(default_factory=NewestCopies)
    renders: RenderMemo = field(default_factory=RenderMemo)
    # a service's pods as the operator's pod watch has them (None: not listed yet, or no
    # watch): main.py sets it; without it a pass that needs the pods lists them
    pods_of: Callable[[tuple[str, str]], list[dict[str, Any]] | None] = field(
        default=lambda _key: None
    )


def build_deps(env: Mapping[str, str]) -> Deps:
    cfg = load_operator_config(env)
    return Deps(
        cfg=cfg,
        look_budget=look_budget_of(cfg),
        kube=KubeClient(build_api_client(env.get("KUBECONFIG"))),
        prometheus=build_prometheus(cfg),
    )
