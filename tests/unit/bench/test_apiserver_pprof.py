"""The API server's profile read as CPU-s per class, and the report's table of it."""

from __future__ import annotations

from typing import Any

from bench.apiserver_pprof import NAMES, OTHER, by_class, classify, parse_traces
from bench.scale_report import profile_classes, render_profile

TRACES = """File: kube-apiserver
Type: cpu
Duration: 40s, Total samples = 1.25s ( 3.12%)
-----------+-------------------------------------------------------
      1.2s   runtime.memmove
             sigs.k8s.io/json.Unmarshal
             k8s.io/apiserver/pkg/storage/cacher.(*cacheWatcher).processInterval
-----------+-------------------------------------------------------
      30ms   sigs.k8s.io/structured-merge-diff/v6/typed.handleAtom
             k8s.io/apiserver/pkg/storage/etcd3.(*store).GuaranteedUpdate
-----------+-------------------------------------------------------
     500us   syscall.Syscall6
-----------+-------------------------------------------------------
"""


def test_each_stack_is_read_with_its_time_and_frames_leaf_first() -> None:
    traces = parse_traces(TRACES)
    assert [round(t, 6) for t, _ in traces] == [1.2, 0.03, 0.0005]
    assert traces[0][1][0] == "runtime.memmove" and len(traces[0][1]) == 3
    assert traces[2][1] == ["syscall.Syscall6"]


def test_a_stack_goes_to_the_first_class_one_of_its_frames_names() -> None:
    traces = parse_traces(TRACES)
    # decoding inside a watch is the watch's; the schema walk inside an etcd update is the apply's
    assert classify(traces[0][1]) == "watch: events to watchers"
    assert classify(traces[1][1]).startswith("managedFields")
    assert classify(traces[2][1]) == OTHER
    seconds = by_class(traces)
    assert list(seconds) == list(NAMES)
    assert seconds["watch: events to watchers"] == 1.2 and seconds[OTHER] == 0.0  # rounded


def _run(arm: str, watch: float | None) -> dict[str, Any]:
    profile = {"error": "HTTP 403"} if watch is None else {"by_class": {"watch": watch, OTHER: 1.0}}
    return {"arm": arm, "apiserver_profile": profile}


def test_the_report_takes_each_arms_median_and_leaves_out_runs_without_a_profile() -> None:
    runs = [_run("raw", 1.0), _run("operator", 2.0), _run("operator", 4.0), _run("raw", None)]
    runs.append(_run("operator", 9.0))
    table = profile_classes(runs)
    assert table == {"watch": {"raw": 1.0, "operator": 4.0}, OTHER: {"raw": 1.0, "operator": 1.0}}
    text = "\n".join(render_profile(table, 40))
    assert "| watch | 1.00 | 4.00 | +3.00 |" in text
    assert "| all (sum of the medians) | 2.00 | 5.00 | +3.00 |" in text
    assert profile_classes([{"arm": "raw"}]) == {}
