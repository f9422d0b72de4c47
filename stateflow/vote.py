"""Execution-guided self-consistency: sample k replies, execute each read-only, vote on results.

:class:`Vote` is an :class:`~stateflow.outputs.LLM` option usable in any state of any flow. The
model is asked ``k`` times for the same prompt (temperature > 0, a distinct seed each; sequential
requests share a llama.cpp server's prompt cache), each reply's action is parsed by ``parse`` and
run by ``executor``, and the reply whose result most candidates share wins.

With ``variants``, the candidates differ by prompt instead of by sampling: candidate ``i`` is
asked as :class:`Variant` ``i`` says (its messages rewritten, another grammar), so one vote can
pool answers written under different instructions, each greedy. Differently prompted answers
err on different tasks, where samples of one prompt tend to repeat one mistake.

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

__all__ = ["Candidate", "Executor", "Variant", "Vote", "decided", "quorum_reached", "tally"]

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


def _results(candidates: list[Candidate]) -> tuple[dict[Hashable, int], dict[Hashable, int]]:
    """Per result key: how many candidates without an error produced it, and the first one that did."""
    counts: dict[Hashable, int] = {}
    first: dict[Hashable, int] = {}
    for i, c in enumerate(candidates):
        if c.error is None:
            counts[c.key] = counts.get(c.key, 0) + 1
            first.setdefault(c.key, i)
    return counts, first


def _leader(counts: dict[Hashable, int], first: dict[Hashable, int]) -> Hashable:
    """The result with the most votes; a tie goes to the one seen first."""
    return max(counts, key=lambda k: (counts[k], -first[k]))


def tally(candidates: list[Candidate]) -> tuple[int, dict[int, int]]:
    """The winning candidate's index and the vote count of each candidate's result.

    Majority over result keys of candidates without an error; a tie goes to the key sampled
    first. When every candidate failed, the first one wins (with zero votes).
    """
    counts, first = _results(candidates)
    votes = {i: (counts[c.key] if c.error is None else 0) for i, c in enumerate(candidates)}
    if not counts:
        return 0, votes
    return first[_leader(counts, first)], votes


def decided(candidates: list[Candidate], remaining: int) -> bool:
    """True when no replies of ``remaining`` more candidates can change :func:`tally`'s winner.

    The worst case gives every remaining vote to one rival: a result seen before needs more
    votes than the leader, or as many when it was seen first; a new result is seen last, so it
    needs more. With nothing but errors so far, any later result would win.
    """
    if remaining <= 0:
        return True
    counts, first = _results(candidates)
    if not counts:
        return False
    leader = _leader(counts, first)
    lead = counts[leader]
    if remaining > lead:
        return False
    return all(
        n + remaining < lead or (n + remaining == lead and first[key] > first[leader])
        for key, n in counts.items()
        if key != leader
    )


def quorum_reached(candidates: list[Candidate], quorum: int) -> bool:
    """True when some result has at least ``quorum`` votes among ``candidates`` (errors never count).

    Asked one candidate at a time and stopped at the first such result, that result is the only
    one with ``quorum`` votes, so it is :func:`tally`'s winner.
    """
    counts, _ = _results(candidates)
    return any(n >= quorum for n in counts.values())


@dataclass(frozen=True)
class Variant:
    """How one candidate's request differs from the state's own request.

    Attributes:
        name: what the variant is, for traces and fingerprints (``"own"``, ``"with thought"``).
        rewrite: applied to the text of the system message and of every message the model is
            sent (``None``: sent as they are). It MUST be a pure function of the text.
        grammar: the candidate's decoding grammar instead of the state's (``None``: the state's);
            a function of the run's context, like :attr:`LLM.grammar`, is called per request.
        sampled: ask at :attr:`Vote.temperature` with seed ``Vote.seed + i``; off (default),
            with the request's own settings (greedy when the profile's temperature is 0).
    """

    name: str
    rewrite: Callable[[str], str] | None = None
    grammar: str | Callable[[Context], str | None] | None = None
    sampled: bool = False


@dataclass(frozen=True)
class Vote:
    """Sample ``k`` candidate replies, execute each read-only, reply with the majority's.

    Attributes:
        parse: extracts the action from a reply (``None``: no action; such a candidate is an error).
        executor: runs an action read-only and returns a hashable result (see the module doc).
        k: the number of candidates (default: 5, or the number of ``variants``).
        temperature: the sampling temperature of every candidate (must be > 0 to differ).
        seed: the first candidate's seed; candidate i uses ``seed + i``.
        greedy_first: candidate 0 is asked with the request's own settings (the model's greedy
            reply when the profile's temperature is 0), the others are sampled. Ties go to the
            first candidate, so when no result has a majority the vote falls back to the reply
            the state would have written without voting, not to a random sample.
        variants: candidate ``i`` is asked as ``variants[i]`` says (see :class:`Variant`);
            ties go to the first variant, so put the state's own request first.
        stop_when_decided: stop asking once the candidates left cannot change the winner
            (:func:`decided`): the same reply as asking all ``k``, with fewer calls. With two
            of three greedy variants agreeing, the third is never asked, so put the cheapest
            variants first.
        quorum: stop asking as soon as ``quorum`` candidates share a result; that result wins
            (``None``: no such rule). Unlike ``stop_when_decided`` this may reply otherwise than
            asking all ``k`` would (two agreeing answers are trusted over three later ones), and
            it is what makes a long list of variants affordable: most votes end after two calls,
            and the later variants are asked only while the answers disagree or fail.
    """

    parse: ActionParser
    executor: Executor
    k: int | None = None
    temperature: float = 0.7
    seed: int = 0
    greedy_first: bool = False
    variants: tuple[Variant, ...] = ()
    stop_when_decided: bool = False
    quorum: int | None = None

    def __post_init__(self) -> None:
        if not callable(self.parse) or not callable(self.executor):
            raise TypeError("Vote: parse and executor must be callable")
        if self.variants and self.k is not None and self.k != len(self.variants):
            raise ValueError(f"Vote: k={self.k} but {len(self.variants)} variants; leave k out to use one per variant")
        if self.k is None:  # frozen: resolve the default once, so k reads as a plain int everywhere
            object.__setattr__(self, "k", len(self.variants) if self.variants else 5)
        if self.k < 1:
            raise ValueError(f"Vote: k must be >= 1, got {self.k}")
        if self.quorum is not None and not 2 <= self.quorum <= self.k:
            raise ValueError(f"Vote: quorum must be between 2 and k={self.k}, got {self.quorum}")
        if self.temperature <= 0:
            raise ValueError(f"Vote: temperature must be > 0 (identical samples cannot vote), got {self.temperature}")

    def done(self, candidates: list[Candidate]) -> bool:
        """True when no more candidates need asking: all ``k`` were, or the quorum or (with
        ``stop_when_decided``) the winner is settled."""
        if len(candidates) >= self.size:
            return True
        if self.quorum is not None and quorum_reached(candidates, self.quorum):
            return True
        return self.stop_when_decided and decided(candidates, self.size - len(candidates))

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

    @property
    def size(self) -> int:
        """The number of candidates (``k`` once resolved)."""
        assert self.k is not None  # resolved in __post_init__
        return self.k

    def variant(self, i: int) -> Variant | None:
        """Candidate ``i``'s variant (``None``: no variants, every candidate is sampled alike)."""
        return self.variants[i] if self.variants else None

    def fields(self, base: dict[str, Any], i: int) -> dict[str, Any]:
        """The request fields of candidate ``i`` (``base``: the state's own, or the variant's
        when it has another grammar)."""
        variant = self.variant(i)
        greedy = (self.greedy_first and i == 0) if variant is None else not variant.sampled
        if greedy:
            return dict(base)
        return {**base, "temperature": self.temperature, "seed": self.seed + i}
