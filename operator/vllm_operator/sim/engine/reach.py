"""How near a run came to each budget, so a run under other budgets can be known to be the same.

Every budget enters a run only through comparisons: the API server's two admission checks
(engine.py `_admission`), the scheduler's token budget and active-sequence cap (passes.py,
cohort.py). Two configurations that differ only in budgets whose every comparison comes out the
same make the same run, step for step and record for record. A Reach records what a run's
comparisons saw, as the range of limits under which each comes out as it did:

- the entry valve's two checks: the largest figure each let through and the smallest it refused;
- the active cap: the most sequences running when it let the scan go on and the fewest when it
  stopped it;
- the token budget: the most tokens a step had to fit, one more than it scheduled (the pass goes
  on while any is left), and whether it ever cut a chunk short or ended a pass: then the chunk
  or the pass depends on the budget's exact value, and only that value runs the same.

planning/evaluate.py reports it with a replay, and the tuner answers a move's replay from one
already made (tuning/same_replays.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vllm_operator.sim.engine.config import ResolvedConfig


@dataclass
class Reach:
    """What one run's budget comparisons saw (EngineCore.reach)."""

    # max_num_queued_reqs refuses when `unfinished + n > limit`
    requests_admitted: int = 0
    requests_refused: int | None = None
    # max_num_queued_tokens, checked after it, refuses when `prompt tokens queued >= limit`
    tokens_admitted: int = -1
    tokens_refused: int | None = None
    # max_num_active_seqs stops an admission when `running >= limit`
    running_admitted: int = -1
    running_stopped: int | None = None
    # max_num_batched_tokens: a step's tokens must fit, and the pass goes on while any is left
    budget_used: int = 0
    budget_bound: bool = False

    def admit_requests(self, demand: int) -> None:
        self.requests_admitted = max(self.requests_admitted, demand)

    def refuse_requests(self, demand: int) -> None:
        self.requests_refused = _least(self.requests_refused, demand)

    def admit_tokens(self, queued: int) -> None:
        self.tokens_admitted = max(self.tokens_admitted, queued)

    def refuse_tokens(self, queued: int) -> None:
        self.tokens_refused = _least(self.tokens_refused, queued)

    def see_cap(self, passed: int, stopped: int | None) -> None:
        """A scheduling pass's cap checks: the most sequences running when one let the scan go
        on (-1: none did), and how many when one stopped it (None: none did)."""
        self.running_admitted = max(self.running_admitted, passed)
        if stopped is not None:
            self.running_stopped = _least(self.running_stopped, stopped)

    def see_step(self, used: int, bound: bool) -> None:
        """A step scheduled `used` tokens of its budget; `bound`: the budget ran out, cut a
        chunk or is otherwise in what the step did."""
        self.budget_used = max(self.budget_used, used + 1)
        self.budget_bound = self.budget_bound or bound

    def merge(self, other: Reach) -> Reach:
        """Both runs' comparisons: a limit the same for both is the same for the pair."""
        return Reach(
            max(self.requests_admitted, other.requests_admitted),
            _least(self.requests_refused, other.requests_refused),
            max(self.tokens_admitted, other.tokens_admitted),
            _least(self.tokens_refused, other.tokens_refused),
            max(self.running_admitted, other.running_admitted),
            _least(self.running_stopped, other.running_stopped),
            max(self.budget_used, other.budget_used),
            self.budget_bound or other.budget_bound,
        )

    def same_run(self, ran: ResolvedConfig, other: ResolvedConfig) -> bool:
        """A run under `other` is this run under `ran`: they differ only in budgets whose
        every comparison comes out the same."""
        budget = other.max_num_batched_tokens
        same_budget = budget == ran.max_num_batched_tokens or (
            not self.budget_bound and budget >= self.budget_used
        )
        admitted = (self.requests_admitted, self.tokens_admitted + 1, self.running_admitted + 1)
        return (
            same_budget
            and _between(admitted[0], other.max_num_queued_reqs, self.requests_refused, True)
            and _between(admitted[1], other.max_num_queued_tokens, self.tokens_refused, False)
            and _between(admitted[2], other.max_num_active_seqs, self.running_stopped, False)
            and replace(
                other,
                max_num_queued_reqs=ran.max_num_queued_reqs,
                max_num_queued_tokens=ran.max_num_queued_tokens,
                max_num_batched_tokens=ran.max_num_batched_tokens,
                max_num_active_seqs=ran.max_num_active_seqs,
            )
            == ran
        )


def _between(low: int, limit: int | None, refused: int | None, above: bool) -> bool:
    """`limit` lets every figure up to `low` through and refuses every one from `refused` up
    (None: no limit, which refuses nothing). `above`: the check refuses a figure above the
    limit (so `refused` must be above it), else one at it or above."""
    if limit is None:
        return refused is None
    if refused is None:
        return low <= limit
    return low <= limit and (limit < refused if above else limit <= refused)


def _least(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)
