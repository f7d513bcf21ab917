"""Tuned services with twins under steady load: the tuner deciding on real figures while a
fault test breaks something (the soak, and the control-plane faults' second namespace)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.faults.services import tuned_service
from tests.support.harness import Harness
from tests.support.invariants import condition, list_services, wait_nothing_lost
from tests.support.kube import Cluster, fresh_namespace
from tests.support.load import BackgroundLoad
from tests.support.wait import wait_until

RATE = 2.0  # requests/s per service: load the tuner sees, not a benchmark
# the loaded fixture's load lasts this long: past the longest test that uses it (about 3 minutes)
LOADED_SECONDS = 420


@dataclass
class Loaded:
    namespace: str
    names: list[str]
    harness: Harness
    loads: list[BackgroundLoad]


def start_loaded(
    cluster: Cluster,
    harness: Harness,
    namespace: str,
    names: list[str],
    *,
    seconds: float,
    gpu: str = "H100-80GB",
) -> list[BackgroundLoad]:
    """Apply tuned services, wait until the tuner acts on usable metrics for each and each is
    Ready, then put `RATE` requests/s on each for `seconds`; returns the loads."""
    for name in names:
        obj = tuned_service(namespace, name, gpu=gpu)
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj))

    def tuning() -> bool:
        services = list_services(cluster, namespace)
        active = [s for s in services if condition(s, "TuningActive").get("status") == "True"]
        return len(active) == len(names)

    wait_until(tuning, timeout=180, what=f"{namespace}: every service tuned on usable metrics")
    # the tuner may see a pod's metrics before the pod is Ready (its twin's readiness): wait
    wait_nothing_lost(cluster, namespace, names, timeout=120, what=f"{namespace}: every one Ready")
    return [
        BackgroundLoad(
            harness.service(namespace, n)["url"],
            rate=RATE, duration=seconds, prompt=200, output=100,
        ).start()
        for n in names
    ]  # fmt: skip


@pytest.fixture
def loaded(cluster: Cluster, tmp_path: Path) -> Iterator[Loaded]:
    """Three tuned services on the A100 node (1 to 2 GPUs each, of its 8) with twins under load,
    in a namespace of their own, so the test's own namespace can hold services without twins."""
    with fresh_namespace(cluster) as namespace:
        (tmp_path / "loaded").mkdir()
        harness = Harness(cluster, namespace, tmp_path / "loaded", time_scale=1.0)
        names = [f"loaded-{i}" for i in range(3)]
        try:
            loads = start_loaded(
                cluster, harness, namespace, names, seconds=LOADED_SECONDS, gpu="A100-80GB"
            )
            yield Loaded(namespace, names, harness, loads)
        finally:
            harness.stop()
