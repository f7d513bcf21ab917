"""k8s/listwatch.py: failures back off, longer with each in a row until a watch goes through
(the LIST, the bookmark and the 410 are in test_pod_watch.py)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

from vllm_operator.k8s.listwatch import list_and_watch


class FlakyKube:
    """LIST fails twice, then a watch fails once, then one event and the caller stops."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop, self.lists, self.watches = stop, 0, 0

    def list_at(self, *_: Any) -> tuple[list[dict[str, Any]], str]:
        self.lists += 1
        if self.lists <= 2:
            raise OSError("connection refused")
        return [{"metadata": {"name": "a", "resourceVersion": "5"}}], "5"

    def watch(self, *_: Any) -> Iterator[dict[str, Any]]:
        self.watches += 1
        if self.watches == 1:
            raise OSError("reset")
        yield {"type": "ADDED", "object": {"metadata": {"name": "b", "resourceVersion": "6"}}}


def test_failures_in_a_row_back_off_longer_until_a_watch_goes_through() -> None:
    stop = threading.Event()
    kube = FlakyKube(stop)
    waits: list[int] = []
    seen: list[str] = []

    def changed(_type: str, obj: dict[str, Any]) -> None:
        seen.append(obj["metadata"]["name"])
        stop.set()

    list_and_watch(
        kube, "v1", "Pod", "team-a", "",  # type: ignore[arg-type]
        listed=lambda objs: seen.extend(o["metadata"]["name"] for o in objs),
        changed=changed, stop=stop, watch_seconds=5,
        backoff=lambda n: waits.append(n) or 0.0, log=logging.getLogger("test"),
    )  # fmt: skip

    assert waits == [1, 2, 3]  # two LISTs, then the first watch: in a row until one goes through
    assert seen == ["a", "b"] and kube.lists == 3  # the watch resumed from the list's version
