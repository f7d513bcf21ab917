"""The Watchdog's continuous checks, fed polls by hand: status never goes back."""

from __future__ import annotations

from typing import Any, cast

from tests.support.invariants import Watchdog
from tests.support.kube import Cluster


def svc(observed: int | None, evaluated: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if observed is not None:
        status["observedGeneration"] = observed
    if evaluated is not None:
        status["tuning"] = {"lastEvaluated": evaluated}
    return {"metadata": {"name": "chat"}, "spec": {}, "status": status}


def violations(*polls: dict[str, Any]) -> list[str]:
    dog = Watchdog(cast(Cluster, None), "ns")  # never started: check() is fed by hand
    for poll in polls:
        dog.check([poll], {})
    return dog.violations


def test_status_that_moves_forward_or_stays_is_no_violation() -> None:
    assert (
        violations(
            svc(None, None),
            svc(1, None),
            svc(1, "2026-12-01T10:00:00Z"),
            svc(1, "2026-12-01T10:00:00.5Z"),
            svc(2, "2026-12-01T10:00:00.500000+00:00"),
        )
        == []
    )


def test_an_older_generation_or_older_tuner_memory_written_back_is_seen() -> None:
    assert violations(svc(2, None), svc(1, None)) == ["chat: observedGeneration 2 -> 1"]
    assert violations(svc(1, None), svc(None, None)) == ["chat: observedGeneration 1 -> None"]
    late, early = "2026-12-01T10:00:02Z", "2026-12-01T10:00:01.9Z"
    (older,) = violations(svc(1, late), svc(1, early))
    assert older.startswith("chat: status.tuning.lastEvaluated 1796119202.0 ->")
    (gone,) = violations(svc(1, late), svc(1, None))
    assert gone.endswith("-> None")
