"""How long the figures have shown a problem, and why a budget move at the replica cap waits.

With the replica lever capped (maxReplicas, autoscaling off) a budget move is the only remedy
left, and every one restarts every pod, maxRestartsPerHour at most. The figures are means over
the metrics window, so the first passes after the load rises read a window that mixes the load
before with the load now: a lower arrival rate, the lengths of the requests that finished
before, or no finished request at all (no token histograms, so the engine model has no workload
to replay). A move sized on that mix is too small for the load that came (the x2 step where the
model's move would have gone further), and it spends the restart. So at the cap a budget move
for a problem waits until the problem has lasted max(`retune_problem_age`, the window): the
window then holds only the load with the problem. The wait is bounded: once the problem has
lasted that long nothing here holds it again, until a pass shows no problem and a new one starts.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from vllm_operator.tuning import signals
from vllm_operator.tuning.inputs import Inputs
from vllm_operator.tuning.outcome import Blocked
from vllm_operator.tuning.reasons import Reason


def has_problem(i: Inputs) -> bool:
    """The figures show something a budget move might fix."""
    return (
        signals.rejections_over(i)
        or signals.over(i, "ttft")
        or signals.over(i, "itl")
        or signals.preempting(i)
    )


def replicas_capped(i: Inputs) -> str | None:
    """Why adding replicas is not possible now, None when it is."""
    scaling = i.scaling
    if scaling is None:
        return "autoscaling is off"
    if scaling.max_replicas is not None and i.replicas >= scaling.max_replicas:
        return f"replicas at maxReplicas {scaling.max_replicas}"
    if i.unplaced:
        return i.unplaced_phrase()
    return None


def stamp_problem(i: Inputs) -> Inputs:
    """`i` with state.problem_since kept while the figures show a problem, set to now when one
    starts, and cleared by a pass that shows none."""
    since = (i.state.problem_since or i.now) if has_problem(i) else None
    if since == i.state.problem_since:
        return i
    return replace(i, state=replace(i.state, problem_since=since))


def window_wait(i: Inputs) -> Blocked | None:
    """What stops a budget move for the problem now: replicas capped and the problem younger
    than max(retune_problem_age, the metrics window). None when nothing here stops it."""
    capped, since = replicas_capped(i), i.state.problem_since
    if capped is None or since is None:
        return None
    window = timedelta(seconds=i.snapshot.window_seconds)
    age = i.now - since
    left = max(i.settings.retune_problem_age, window) - age
    if left <= timedelta(0):
        return None
    return Blocked(
        Reason.RETUNE_AWAITS_WINDOW,
        f"a budget move waits {left.total_seconds():.0f}s more for a "
        f"{window.total_seconds():.0f}s window that holds only the problem "
        f"(seen for {age.total_seconds():.0f}s)",
    )
