"""Moves, blockers, and how a rule turns its diagnosis plus remedies into one Decision.

A rule states a diagnosis (a phrase with the figures) and the remedies that could fix it, best
first. The first remedy that can act becomes the decision; when none can, the rule holds and says
every blocker, leading with the most telling one (a pinned bound beats "autoscaling is off").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from vllm_operator.tuning.model import Action, Decision, MetricsSnapshot, TuningState
from vllm_operator.tuning.reasons import Reason


@dataclass(frozen=True)
class Move:
    action: Action
    state: TuningState  # the state after the move
    phrase: str  # e.g. "replicas 2 -> 3"


@dataclass(frozen=True)
class Blocked:
    reason: Reason  # becomes the Hold's reason when every remedy is blocked
    phrase: str  # e.g. "replicas at maxReplicas 4"
    disabled: bool = False  # the lever is switched off, which explains less than a pinned bound
    pinned: tuple[str, ...] = ()  # budget keys stopped at an edge of their allowed range
    # a free GPU would lift it (rollout_room.py): the pass asks the handler to look
    asks_spare_gpu: bool = False


Remedy = Callable[[], Move | Blocked]


def hold(
    reason: Reason,
    message: str,
    snapshot: MetricsSnapshot,
    state: TuningState,
    pinned: tuple[str, ...] = (),
) -> Decision:
    return Decision(Action("Hold"), reason, message, snapshot.figures(), state, pinned=pinned)


def act(reason: Reason, diagnosis: str, move: Move, snapshot: MetricsSnapshot) -> Decision:
    return Decision(
        move.action, reason, f"{diagnosis}: {move.phrase}", snapshot.figures(), move.state
    )


def remedy_decision(
    reasons: Sequence[Reason],
    diagnosis: str,
    remedies: Sequence[Remedy],
    snapshot: MetricsSnapshot,
) -> Decision | Blocked:
    """The first remedy that acts, with reasons[n] as the reason of remedy n; else a Blocked.

    The returned Blocked carries the lead reason and every blocker's phrase, so a problem rule
    can hold with it (hold_for) and an opportunity rule can let the chain go on.
    """
    blockers: list[Blocked] = []
    for reason, remedy in zip(reasons, remedies, strict=True):
        outcome = remedy()
        if isinstance(outcome, Move):
            # a better remedy that a free GPU would allow is still worth the look: the pass
            # is decided again with it (decide_seeing_spare_gpu)
            asks = any(b.asks_spare_gpu for b in blockers)
            return replace(act(reason, diagnosis, outcome, snapshot), asks_spare_gpu=asks)
        blockers.append(outcome)
    lead = next((b for b in blockers if not b.disabled), blockers[0])
    pinned = tuple(dict.fromkeys(k for b in blockers for k in b.pinned))
    asks = any(b.asks_spare_gpu for b in blockers)
    return Blocked(lead.reason, "; ".join(b.phrase for b in blockers), lead.disabled, pinned, asks)


def hold_for(
    outcome: Decision | Blocked, diagnosis: str, snapshot: MetricsSnapshot, state: TuningState
) -> Decision:
    if isinstance(outcome, Decision):
        return outcome
    message = f"{diagnosis}, but {outcome.phrase}"
    held = hold(outcome.reason, message, snapshot, state, outcome.pinned)
    return replace(held, asks_spare_gpu=outcome.asks_spare_gpu)
