"""The typed form of a synthesized request: clauses, sentences, constraints, time bounds.

A request keeps its *structure* (which clause form, which actions, which surface form of each
terminal), not only its text, so the text can be re-rendered after a mutation (root-cause
dissection) and the constraints are always derived from the structure, never parsed back from
the text.

Actions are integers ``0..n-1`` (indices into :attr:`Request.actions`). ``Order(a, b)`` means
action ``a`` must be executed before action ``b``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Literal

__all__ = [
    "Clause",
    "ClauseForm",
    "Group",
    "Order",
    "Relative",
    "Request",
    "Sentence",
    "SynthesisStats",
    "TimeBound",
]


class ClauseForm(Enum):
    """The clause shapes of the request grammar (docs/pdoctor.md)."""

    VERB = "SUBJ VP<> OBJ"  # "A must be done before B"
    PREP = "SUBJ VP0 P<> OBJ"  # "A should happen after B"
    FRONTED_PREP = "P<> OBJ, SUBJ VP0"  # "Before B, A should happen"
    SUBORD = "DEP SC<> DEP'"  # "A should happen once B is done"
    FRONTED_SUBORD = "SC<> DEP', DEP"  # "Once B is done, A should happen"


@dataclass(frozen=True)
class Order:
    """Action ``first`` runs before action ``then``; stated in sentence ``sentence``."""

    first: int
    then: int
    sentence: int

    @property
    def name(self) -> str:
        return f"s{self.sentence}:{self.first}<{self.then}"


@dataclass(frozen=True)
class TimeBound:
    """A time bound of the extended version: ``start_after`` (start >= minute) or
    ``finish_before`` (end <= minute); minutes since midnight."""

    action: int
    kind: Literal["start_after", "finish_before"]
    minute: int
    sentence: int
    form: int = 0  # surface form index

    @property
    def name(self) -> str:
        op = ">=" if self.kind == "start_after" else "<="
        which = "start" if self.kind == "start_after" else "end"
        return f"s{self.sentence}:{which}({self.action}){op}{self.minute // 60:02d}:{self.minute % 60:02d}"


@dataclass(frozen=True)
class Relative:
    """A relative clause attached to a group: ``which`` the group runs before/after ``obj``."""

    precedes: bool
    obj: tuple[int, ...]
    prepositional: bool  # "which should happen before X" (True) or "which must precede X" (False)
    words: tuple[int, ...] = (0, 0)


@dataclass(frozen=True)
class Group:
    """One or more actions in subject or object position, optionally with a relative clause."""

    actions: tuple[int, ...]
    relative: Relative | None = None


@dataclass(frozen=True)
class Clause:
    """One clause: ``subj`` runs before ``obj`` when ``precedes``, after it otherwise.

    ``words`` picks the surface form of each terminal the form uses (an index taken modulo the
    number of forms, so any integer is valid and "rephrasing" is adding one).
    """

    form: ClauseForm
    subj: Group
    obj: Group
    precedes: bool
    words: tuple[int, ...] = (0, 0, 0)

    def orders(self, sentence: int) -> list[Order]:
        """The ordering constraints this clause states (its relative clauses included)."""
        out: list[Order] = []
        for s in self.subj.actions:
            for o in self.obj.actions:
                out.append(Order(s, o, sentence) if self.precedes else Order(o, s, sentence))
        for g in (self.subj, self.obj):
            if g.relative is not None:
                for a in g.actions:
                    for o in g.relative.obj:
                        out.append(Order(a, o, sentence) if g.relative.precedes else Order(o, a, sentence))
        return out


@dataclass(frozen=True)
class Sentence:
    """Clauses joined by connectives (``len(connectives) == len(clauses) - 1``), or time bounds."""

    clauses: tuple[Clause, ...] = ()
    connectives: tuple[int, ...] = ()
    bounds: tuple[TimeBound, ...] = ()

    def __post_init__(self) -> None:
        if self.clauses and len(self.connectives) != len(self.clauses) - 1:
            raise ValueError(f"{len(self.clauses)} clauses need {len(self.clauses) - 1} connectives")


@dataclass(frozen=True)
class SynthesisStats:
    """How a request was made: seconds spent (all, and in Z3), expansions rejected as
    unsatisfiable, sentences given up after ``tries`` rejections."""

    synthesis_s: float
    z3_s: float
    rejected: int
    dropped: int


@dataclass(frozen=True)
class Request:
    """A synthesized request.

    Attributes:
        profession: the topic.
        actions: the activity phrases, one per action.
        tools: the mock tool names, one per action (same order).
        sentences: the constraint sentences (index = the ``sentence`` of their constraints).
        durations: extended version only: minutes each action takes (hidden from the agent;
            the tool reports it when called).
        day_start: extended version: the earliest start, minutes since midnight.
        label: where it came from (seed and index), for traces.
        stats: synthesis statistics (``None`` for hand-made or mutated requests).
    """

    profession: str
    actions: tuple[str, ...]
    tools: tuple[str, ...]
    sentences: tuple[Sentence, ...]
    durations: tuple[int, ...] | None = None
    day_start: int = 8 * 60
    label: str = ""
    stats: SynthesisStats | None = field(default=None, compare=False)

    @property
    def extended(self) -> bool:
        return self.durations is not None

    @property
    def orders(self) -> list[Order]:
        """Every ordering constraint, renumbered to the sentence's current position."""
        return [o for i, s in enumerate(self.sentences) for c in s.clauses for o in c.orders(i)]

    @property
    def bounds(self) -> list[TimeBound]:
        return [replace(b, sentence=i) for i, s in enumerate(self.sentences) for b in s.bounds]

    @property
    def text(self) -> str:
        from stateflow.envs.pdoctor.grammar import render_request

        return render_request(self)
