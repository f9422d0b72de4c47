"""Execution-guided self-consistency: sample k replies, execute each read-only, vote on results.

:class:`Vote` is an :class:`~stateflow.outputs.LLM` option usable in any state of any flow. The
model is asked ``k`` times for the same prompt (temperature > 0, a distinct seed each; sequential
requests share a llama.cpp server's prompt cache), each reply's action is parsed by ``parse`` and
run by ``executor``, and the reply whose result most candidates share wins.

``executor(ctx, action) -> Hashable`` MUST be read-only: it must not advance the episode's turn
count nor change the environment's state (for SQL: run the SELECT on a separate read-only
connection). A raised exception is that candidate's error; errors never win over a result.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from stateflow.context import Context
from stateflow.repetition import ActionParser

__all__ = ["Candidate", "Executor", "Vote", "tally"]

Executor = Callable[[Context, Hashable], Hashable]
"""``executor(ctx, action) -> result`` (read-only; raise on failure)."""


@dataclass(frozen=True)
class Candidate:
    """One sampled reply and what its action produced.

    Attributes:
        reply: the reply text.
        action: the parsed action (``None``: the reply carried none).
        key: the result of executing it (hashable), or ``None`` on error / no action.
        error: why the candidate has no result, or ``None``.
    """

    reply: str
    action: Hashable | None
    key: Hashable | None
    error: str | None


def tally(candidates: list[Candidate]) -> tuple[int, dict[int, int]]:
    """The winning candidate's index and the vote count of each candidate's result.

    Majority over result keys of candidates without an error; a tie goes to the key sampled
    first. When every candidate failed, the first one wins (with zero votes).
    """
    counts: dict[Hashable, int] = {}
    first: dict[Hashable, int] = {}
    for i, c in enumerate(candidates):
        if c.error is None:
            counts[c.key] = counts.get(c.key, 0) + 1
            first.setdefault(c.key, i)
    votes = {i: (counts[c.key] if c.error is None else 0) for i, c in enumerate(candidates)}
    if not counts:
        return 0, votes
    best = max(counts, key=lambda k: (counts[k], -first[k]))
    return first[best], votes


@dataclass(frozen=True)
class Vote:
    """Sample ``k`` candidate replies, execute each read-only, reply with the majority's.

    Attributes:
        parse: extracts the action from a reply (``None``: no action; such a candidate is an error).
        executor: runs an action read-only and returns a hashable result (see the module doc).
        k: the number of candidates.
        temperature: the sampling temperature of every candidate (must be > 0 to differ).
        seed: the first candidate's seed; candidate i uses ``seed + i``.
        greedy_first: candidate 0 is asked with the request's own settings (the model's greedy
            reply when the profile's temperature is 0), the others are sampled. Ties go to the
            first candidate, so when no result has a majority the vote falls back to the reply
            the state would have written without voting, not to a random sample.
    """

    parse: ActionParser
    executor: Executor
    k: int = 5
    temperature: float = 0.7
    seed: int = 0
    greedy_first: bool = False

    def __post_init__(self) -> None:
        if not callable(self.parse) or not callable(self.executor):
            raise TypeError("Vote: parse and executor must be callable")
        if self.k < 1:
            raise ValueError(f"Vote: k must be >= 1, got {self.k}")
        if self.temperature <= 0:
            raise ValueError(f"Vote: temperature must be > 0 (identical samples cannot vote), got {self.temperature}")

    def judge(self, ctx: Context, reply: str) -> Candidate:
        """Parse and execute one reply; a failure becomes the candidate's error."""
        action = self.parse(reply)
        if action is None:
            return Candidate(reply, None, None, "no action in the reply")
        try:
            key = self.executor(ctx, action)
            hash(key)
        except Exception as err:  # the candidate's failure is data for the vote, never fatal
            return Candidate(reply, action, None, f"{type(err).__name__}: {err}")
        return Candidate(reply, action, key, None)

    def fields(self, base: dict[str, Any], i: int) -> dict[str, Any]:
        """The request fields of candidate ``i``."""
        if self.greedy_first and i == 0:
            return dict(base)
        return {**base, "temperature": self.temperature, "seed": self.seed + i}
