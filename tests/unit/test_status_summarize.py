from datetime import UTC, datetime
from typing import Any

import pytest

from vllm_operator.status.summarize import Observed, newsworthy, status_changed, summarize_status

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def deployment(
    desired: int,
    replicas: int,
    updated: int,
    ready: int,
    gen: int = 2,
    seen: int = 2,
    progressing_reason: str = "NewReplicaSetAvailable",
) -> dict[str, Any]:
    return {
        "metadata": {"generation": gen},
        "spec": {"replicas": desired},
        "status": {
            "observedGeneration": seen,
            "replicas": replicas,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "conditions": [{"type": "Progressing", "reason": progressing_reason, "message": "pm"}],
        },
    }


def summarize(observed: Observed, previous: dict[str, Any] | None = None) -> dict[str, Any]:
    return summarize_status(
        generation=7,
        previous=previous or {},
        observed=observed,
        effective={"args": ["m"]},
        selector="s=x",
        now=NOW,
    )


def states(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


@pytest.mark.parametrize(
    ("dep", "unschedulable", "want"),
    [
        (
            deployment(2, 2, 2, 2),
            None,
            {
                "Ready": ("True", "ReplicasAvailable"),
                "Progressing": ("False", "RolloutComplete"),
                "Degraded": ("False", "AsExpected"),
                "Stalled": ("False", "AsExpected"),
            },
        ),
        (
            deployment(2, 2, 2, 1),
            None,
            {
                "Ready": ("False", "ReplicasNotReady"),
                "Progressing": ("False", "RolloutComplete"),
                "Degraded": ("False", "AsExpected"),
                "Stalled": ("False", "AsExpected"),
            },
        ),
        # the Deployment controller has not seen the new template: not Ready, whatever counts say
        (
            deployment(2, 2, 2, 2, gen=3, seen=2),
            None,
            {
                "Ready": ("False", "ReplicasNotReady"),
                "Progressing": ("True", "RollingOut"),
                "Degraded": ("False", "AsExpected"),
                "Stalled": ("False", "AsExpected"),
            },
        ),
        # old and new ReplicaSets both have pods: still rolling
        (
            deployment(2, 3, 1, 2),
            None,
            {
                "Ready": ("False", "ReplicasNotReady"),
                "Progressing": ("True", "RollingOut"),
                "Degraded": ("False", "AsExpected"),
                "Stalled": ("False", "AsExpected"),
            },
        ),
        (
            deployment(2, 2, 2, 0),
            "2/2 pods cannot be scheduled: Insufficient nvidia.com/gpu",
            {
                "Ready": ("False", "ReplicasNotReady"),
                "Progressing": ("False", "RolloutComplete"),
                "Degraded": ("True", "Unschedulable"),
                "Stalled": ("False", "Unschedulable"),
            },
        ),
        (
            deployment(2, 2, 1, 1, progressing_reason="ProgressDeadlineExceeded"),
            None,
            {
                "Ready": ("False", "ReplicasNotReady"),
                "Progressing": ("True", "RollingOut"),
                "Degraded": ("True", "ProgressDeadlineExceeded"),
                "Stalled": ("True", "ProgressDeadlineExceeded"),
            },
        ),
        # waiting for a GPU past the Deployment's progress deadline: Failed for kstatus
        (
            deployment(2, 2, 2, 0, progressing_reason="ProgressDeadlineExceeded"),
            "2/2 pods cannot be scheduled: Insufficient nvidia.com/gpu",
            {
                "Ready": ("False", "ReplicasNotReady"),
                "Progressing": ("False", "RolloutComplete"),
                "Degraded": ("True", "Unschedulable"),
                "Stalled": ("True", "ProgressDeadlineExceeded"),
            },
        ),
        (
            deployment(0, 0, 0, 0),
            None,
            {
                "Ready": ("True", "ScaledToZero"),
                "Progressing": ("False", "RolloutComplete"),
                "Degraded": ("False", "AsExpected"),
                "Stalled": ("False", "AsExpected"),
            },
        ),
    ],
)
def test_conditions_follow_the_deployment(
    dep: dict[str, Any], unschedulable: str | None, want: dict[str, tuple[str, str]]
) -> None:
    status = summarize(Observed(dep, unschedulable_message=unschedulable))
    assert states(status) == want
    assert status["observedGeneration"] == 7
    assert status["selector"] == "s=x"
    assert all(c["observedGeneration"] == 7 for c in status["conditions"])


def test_a_problem_that_stops_rendering_is_degraded_and_not_ready() -> None:
    status = summarize(Observed(None, problem=("UnknownGPUType", "spec.gpu.type RTX is unknown")))
    assert states(status) == {
        "Ready": ("False", "UnknownGPUType"),
        "Progressing": ("False", "UnknownGPUType"),
        "Degraded": ("True", "UnknownGPUType"),
        "Stalled": ("True", "UnknownGPUType"),
    }
    assert (status["replicas"], status["readyReplicas"]) == (0, 0)


def test_a_problem_still_counts_the_pods_of_the_last_good_spec() -> None:
    # e.g. ApplyFailed (quota) after an edit: nothing new applied, the old pods still serve
    running = Observed(deployment(3, 3, 3, 2), problem=("ApplyFailed", "quota exceeded"))
    status = summarize(running)
    assert states(status)["Degraded"] == ("True", "ApplyFailed")
    assert states(status)["Ready"] == ("False", "ApplyFailed")
    assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"]) == (3, 3, 2)


def test_replica_counts() -> None:
    status = summarize(Observed(deployment(3, 3, 2, 1)))
    assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"]) == (3, 2, 1)


def test_same_observation_twice_changes_nothing() -> None:
    first = summarize(Observed(deployment(2, 2, 2, 2)))
    second = summarize(Observed(deployment(2, 2, 2, 2)), previous=first)
    assert not status_changed(first, second)
    third = summarize(Observed(deployment(2, 2, 2, 1)), previous=first)
    assert status_changed(first, third)


def test_conditions_of_other_writers_are_neither_copied_nor_a_change() -> None:
    first = summarize(Observed(deployment(2, 2, 2, 2)))
    stored = {
        **first,
        "conditions": [*first["conditions"], {"type": "TuningActive", "status": "True"}],
    }
    second = summarize(Observed(deployment(2, 2, 2, 2)), previous=stored)
    assert [c["type"] for c in second["conditions"]] == [
        "Degraded",
        "Progressing",
        "Ready",
        "Stalled",
    ]
    assert not status_changed(stored, second)


def test_ready_false_says_when_ready_pods_run_an_older_spec() -> None:
    # a paused or just-edited Deployment: both pods ready, neither on the new template
    status = summarize(Observed(deployment(2, 2, 0, 2, gen=3, seen=3)))
    ready = next(x for x in status["conditions"] if x["type"] == "Ready")
    assert (ready["status"], ready["message"]) == (
        "False",
        "2/2 replicas ready, 0/2 on the current spec.",
    )


def _types(conds: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(x["type"], x["status"]) for x in conds]


def test_the_first_pass_of_a_service_coming_up_posts_nothing() -> None:
    """A new service whose pods start: Ready=False, Degraded/Stalled False are not news."""
    first = summarize(Observed(deployment(2, 0, 0, 0, seen=1)))["conditions"]
    assert newsworthy([], first) == []


def test_ready_going_back_to_not_ready_is_news() -> None:
    done = summarize(Observed(deployment(2, 2, 2, 2)))["conditions"]
    lost = summarize(Observed(deployment(2, 2, 2, 1)), {"conditions": done})["conditions"]
    assert _types(newsworthy(done, lost)) == [("Ready", "False")]


def test_later_transitions_of_every_condition_but_progressing_are_news() -> None:
    rolling = summarize(Observed(deployment(2, 0, 0, 0, seen=1)))["conditions"]
    done = summarize(Observed(deployment(2, 2, 2, 2)), {"conditions": rolling})["conditions"]
    assert _types(newsworthy(rolling, done)) == [("Ready", "True")]  # Progressing flipped too
    problem = Observed(deployment(2, 2, 2, 2), problem=("UnknownGPUType", "no such GPU"))
    broken = summarize(problem, {"conditions": done})["conditions"]
    assert _types(newsworthy(done, broken)) == [
        ("Degraded", "True"),
        ("Ready", "False"),
        ("Stalled", "True"),
    ]
    healed = summarize(Observed(deployment(2, 2, 2, 2)), {"conditions": broken})["conditions"]
    assert _types(newsworthy(broken, healed)) == [
        ("Degraded", "False"),
        ("Ready", "True"),
        ("Stalled", "False"),
    ]


def test_a_problem_on_the_first_pass_is_news() -> None:
    problem = Observed(None, problem=("UnknownGPUType", "no such GPU"))
    first = summarize(problem)["conditions"]
    assert _types(newsworthy([], first)) == [
        ("Degraded", "True"),
        ("Ready", "False"),
        ("Stalled", "True"),
    ]


CRASHING = "1/2 pods crash-looping: container vllm restarted 3 times, last exit code 137"


@pytest.mark.parametrize(
    ("dep", "unschedulable", "want"),
    [
        # a server that keeps exiting: Degraded says so, and it does not stall (it may stay up)
        (
            deployment(2, 2, 2, 1),
            None,
            {"Degraded": ("True", "CrashLoopBackOff"), "Stalled": ("False", "CrashLoopBackOff")},
        ),
        # a Pending pod as well: the scheduler's words come first
        (
            deployment(2, 2, 2, 1),
            "1/2 pods cannot be scheduled: Insufficient nvidia.com/gpu",
            {"Degraded": ("True", "Unschedulable"), "Stalled": ("False", "Unschedulable")},
        ),
        # during a rollout past its deadline: stalled, with the kubelet's words
        (
            deployment(2, 2, 1, 1, progressing_reason="ProgressDeadlineExceeded"),
            None,
            {
                "Degraded": ("True", "CrashLoopBackOff"),
                "Stalled": ("True", "ProgressDeadlineExceeded"),
            },
        ),
    ],
)
def test_crash_looping_containers_degrade_the_service(
    dep: dict[str, Any], unschedulable: str | None, want: dict[str, tuple[str, str]]
) -> None:
    observed = Observed(dep, unschedulable_message=unschedulable, crash_loop_message=CRASHING)
    got = {k: v for k, v in states(summarize(observed)).items() if k in want}
    assert got == want
    stalled = next(c for c in summarize(observed)["conditions"] if c["type"] == "Stalled")
    if stalled["status"] == "True":
        assert stalled["message"] == (unschedulable or CRASHING)


@pytest.mark.parametrize(
    ("rolling", "says"),
    [
        ({"maxSurge": 1, "maxUnavailable": 0}, "2/3 replicas updated, each new pod ready before"),
        ({"maxSurge": 3, "maxUnavailable": 0}, "2/3 replicas updated, 3 new pods at a time, each"),
        ({"maxSurge": 0, "maxUnavailable": 1}, "one pod at a time (no GPU was free"),
        ({"maxSurge": "25%", "maxUnavailable": "25%"}, "2/3 replicas updated."),  # not ours
    ],
)
def test_progressing_says_how_the_rollout_replaces_pods(rolling: dict[str, Any], says: str) -> None:
    dep = deployment(3, 4, 2, 3)
    dep["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": rolling}
    cond = next(c for c in summarize(Observed(dep))["conditions"] if c["type"] == "Progressing")
    assert cond["status"] == "True" and says in cond["message"], cond["message"]
