"""N replicas (one Engine each) behind a load balancer, whose size and flags change over time.

Replica lifecycle: starting -> ready -> draining -> stopped.
- `set_replicas(n, now, ready_delay)`: new replicas take traffic `ready_delay` after the call
  (model load and startup); removed replicas are taken from the not-yet-ready ones first (the
  newest first), then the newest ready ones, like a ReplicaSet scale-down. A removed ready
  replica stops taking traffic at once and finishes what it holds (graceful drain).
- `restart_all(new_cfg, now, ready_delay, max_unavailable, max_surge)`: vLLM cannot change
  flags at run time, so every replica is replaced: the old one stops taking traffic and drains
  (it finishes its in-flight requests; none is aborted), and a replacement with `new_cfg` is
  ready `ready_delay` later. With `max_unavailable=k` replicas go k at a time, each wave
  starting when the previous wave's replacements are ready; without it all go at once (an
  outage of `ready_delay` unless other replicas are still ready). A draining replica's GPU is
  assumed free for its replacement at once (no wait for termination). With `max_surge=k` (the
  operator's rollout where k pods' GPUs are free, render/rollout.py) up to k extra pods load
  at once and an old replica stops only when one of them is ready, as the Deployment controller
  does with maxUnavailable 0: the desired size never drops.
The config is validated when the call is made (vLLM's startup errors are raised as ValueError).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from vllm_operator.sim.balancer import Balancer, make_balancer
from vllm_operator.sim.engine import (
    Engine,
    EngineConfig,
    EngineStats,
    GpuProfile,
    InvalidRequestError,
    ModelProfile,
    RequestEvent,
    SimRequest,
    StepCoefficients,
    resolve_config,
)


@dataclass
class Replica:
    id: int
    engine: Engine
    config: EngineConfig
    ready_at: float
    state: str = "starting"  # starting | ready | draining | stopped
    outstanding: int = 0  # sequences accepted and not finished
    stopped_at: float | None = None
    served: int = field(default=0)  # requests accepted
    surge: bool = False  # a rollout's extra pod: not in the desired size until it replaces one
    replaces: bool = False  # a restart wave stopped a pod for it: one short until it is ready


class Fleet:
    def __init__(
        self,
        cfg: EngineConfig,
        gpu: GpuProfile,
        model: ModelProfile,
        replicas: int = 1,
        *,
        balancer: str | Balancer = "round_robin",
        seed: int = 0,
        coeffs: StepCoefficients | None = None,
    ) -> None:
        if replicas < 0:
            raise ValueError(f"replicas must be >= 0, got {replicas}")
        self.config = cfg
        self.gpu = gpu
        self.model = model
        self.coeffs = coeffs or StepCoefficients()
        self.seed = seed
        self.balancer = make_balancer(balancer) if isinstance(balancer, str) else balancer
        self.live: list[Replica] = []  # starting, ready and draining, by id
        self.retired: list[Replica] = []
        self._next_id = 0
        self._waves: list[tuple[float, int, tuple[int, ...], EngineConfig, float]] = []
        self._surge_delay: float | None = None  # a surge rollout under way: its pods' delay
        self._surge_width = 0  # and how many of its pods may load at once (maxSurge)
        self._buffer: list[tuple[int, RequestEvent]] = []  # events met while resizing
        for _ in range(replicas):
            self._add(cfg, ready_at=0.0).state = "ready"

    # ----------------------------------------------------------- membership
    def _add(self, cfg: EngineConfig, ready_at: float) -> Replica:
        engine = Engine(
            cfg,
            self.gpu,
            self.model,
            seed=self.seed * 100_003 + self._next_id,
            coeffs=self.coeffs,
            token_events=False,
        )
        replica = Replica(self._next_id, engine, cfg, ready_at)
        self._next_id += 1
        self.live.append(replica)
        return replica

    def _retire(self, replica: Replica, now: float) -> None:
        replica.state = "stopped"
        replica.stopped_at = now
        self.live.remove(replica)
        self.retired.append(replica)

    def _stop(self, replica: Replica, now: float) -> None:
        """Take a replica out of rotation: at once if it never took traffic, else drain."""
        if replica.state == "starting":
            self._retire(replica, now)
        else:
            replica.state = "draining"
            self._retire_if_drained(replica, now)

    def _retire_if_drained(self, replica: Replica, now: float) -> None:
        if replica.state == "draining" and replica.outstanding == 0 and replica.engine.idle:
            self._retire(replica, now)

    @property
    def active(self) -> list[Replica]:
        """Replicas counted towards the desired size: starting or ready (a surge pod is not)."""
        return [r for r in self.live if r.state in ("starting", "ready") and not r.surge]

    @property
    def ready(self) -> list[Replica]:
        return [r for r in self.live if r.state == "ready"]

    @property
    def rollout_short(self) -> int:
        """Pods a rollout took away and has not replaced yet (maxUnavailable waves; a surge
        rollout is never short)."""
        return sum(1 for r in self.live if r.state == "starting" and r.replaces)

    def set_replicas(self, n: int, now: float, ready_delay: float = 0.0) -> None:
        if n < 0:
            raise ValueError(f"replicas must be >= 0, got {n}")
        self._buffer += self.advance_to(now)
        active = self.active
        for _ in range(n - len(active)):
            self._add(self.config, now + ready_delay)
        if n < len(active):
            victims = sorted(active, key=lambda r: (r.state == "ready", -r.id))[: len(active) - n]
            for replica in victims:
                self._stop(replica, now)

    def restart_all(
        self,
        new_cfg: EngineConfig,
        now: float,
        ready_delay: float,
        max_unavailable: int | None = None,
        max_surge: int = 0,
    ) -> None:
        resolve_config(new_cfg, self.gpu, self.model, self.coeffs)  # vLLM's startup errors
        if max_unavailable is not None and max_unavailable < 1:
            raise ValueError(f"max_unavailable must be >= 1, got {max_unavailable}")
        if max_surge < 0 or (max_surge and max_unavailable is not None):
            raise ValueError(
                f"max_surge must be 0, or >= 1 without max_unavailable, got {max_surge} "
                f"(max_unavailable {max_unavailable})"
            )
        self._buffer += self.advance_to(now)
        self.config = new_cfg
        # a newer restart supersedes the waves, or the surge pod, of an older one
        self._waves, self._surge_delay = [], None
        for pod in [r for r in self.live if r.surge]:
            self._stop(pod, now)
        if max_surge:
            self._surge_delay, self._surge_width = ready_delay, max_surge
            self._surge_next(now)
            return
        ids = [r.id for r in self.active]
        step = max_unavailable or max(len(ids), 1)
        for k, first in enumerate(range(0, len(ids), step)):
            wave = (
                now + k * ready_delay,
                k,
                tuple(ids[first : first + step]),
                new_cfg,
                ready_delay,
            )
            heapq.heappush(self._waves, wave)
        self._run_waves(now)

    def _run_waves(self, now: float) -> None:
        while self._waves and self._waves[0][0] <= now:
            at, _, ids, cfg, delay = heapq.heappop(self._waves)
            for replica in [r for r in self.active if r.id in ids and r.config != cfg]:
                self._stop(replica, at)
                self._add(cfg, at + delay).replaces = True

    def _surge_next(self, now: float) -> None:
        """Start surge pods, up to the rollout's width, while replicas still run the old flags
        that no loading surge pod is already meant to replace."""
        if self._surge_delay is None:
            return
        old = sum(1 for r in self.active if r.config != self.config)
        if not old:
            self._surge_delay = None
            return
        loading = sum(1 for r in self.live if r.surge)
        for _ in range(min(self._surge_width, old) - loading):
            self._add(self.config, now + self._surge_delay).surge = True

    def _promote(self, pod: Replica, now: float) -> None:
        """A ready surge pod replaces one replica on the old flags (the not-yet-ready first, then
        the newest, as a scale-down picks); with none left (a scale-down took them) the
        Deployment has its size already and the extra pod goes."""
        pod.surge = False
        old = sorted(
            (r for r in self.active if r.config != pod.config),
            key=lambda r: (r.state == "ready", -r.id),
        )
        self._stop(old[0] if old else pod, now)
        self._surge_next(now)

    # ----------------------------------------------------------------- time
    def next_action_time(self) -> float | None:
        """The next replica readiness or restart wave (not engine steps)."""
        times = [r.ready_at for r in self.live if r.state == "starting"]
        if self._waves:
            times.append(self._waves[0][0])
        return min(times) if times else None

    def next_event_time(self) -> float | None:
        times = [t for r in self.live if (t := r.engine.next_event_time()) is not None]
        action = self.next_action_time()
        if action is not None:
            times.append(action)
        return min(times) if times else None

    def advance_to(self, now: float) -> list[tuple[int, RequestEvent]]:
        """Run every replica up to `now`, applying readiness and waves in time order."""
        out, self._buffer = self._buffer, []
        while self._waves and self._waves[0][0] <= now:
            at = self._waves[0][0]
            out += self._advance_engines(at)
            self._run_waves(at)
        out += self._advance_engines(now)
        return out

    def _advance_engines(self, now: float) -> list[tuple[int, RequestEvent]]:
        out: list[tuple[int, RequestEvent]] = []
        draining = False
        promoted: list[Replica] = []
        for replica in self.live:
            if replica.state == "starting" and replica.ready_at <= now:
                replica.state = "ready"
                if replica.surge:
                    promoted.append(replica)
            engine = replica.engine
            due = engine.next_event_time()
            if due is not None and due <= now:
                for event in engine.advance(now):
                    if event.kind == "finished":
                        replica.outstanding -= 1
                    out.append((replica.id, event))
            draining = draining or replica.state == "draining"
        for replica in promoted:
            self._promote(replica, now)
            draining = True
        if draining:
            for replica in [r for r in self.live if r.state == "draining"]:
                self._retire_if_drained(replica, now)
        return out

    # ------------------------------------------------------------- requests
    def submit(self, req: SimRequest, now: float) -> tuple[int | None, str | None]:
        """Route a request: (replica id, None) if accepted, else (replica id or None, reason).

        Reasons: vLLM's 503 reasons, "no_replica" (nothing ready: the Service has no endpoint)
        or "invalid" (a 400 from vLLM, e.g. a prompt longer than max_model_len).
        """
        ready = self.ready
        if not ready:
            return None, "no_replica"
        replica = ready[self.balancer.choose(ready)]
        try:
            rejected = replica.engine.submit(req, now)
        except InvalidRequestError:
            return replica.id, "invalid"
        if rejected is not None:
            return replica.id, rejected.reason
        replica.outstanding += req.n
        replica.served += 1
        return replica.id, None

    def stats(self) -> dict[int, EngineStats]:
        return {r.id: r.engine.stats() for r in self.live}

    @property
    def idle(self) -> bool:
        return all(r.engine.idle for r in self.live)
