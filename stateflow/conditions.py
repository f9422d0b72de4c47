"""Transition conditions: named, printable, combinable predicates over the run context.

Conditions are objects, never strings to evaluate. Combine them with ``&``, ``|`` and ``~``;
the combined condition's name is built from its parts, so diagrams, traces and errors all show
the same text.

>>> from stateflow.conditions import last_contains, meta_is
>>> rule = last_contains("Error", kind="tool") | ~meta_is("ok")
>>> rule.name
"(last tool contains 'Error' | not tool.ok == True)"
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stateflow.messages import Kind, Message

if TYPE_CHECKING:
    from stateflow.context import Context

__all__ = [
    "Condition",
    "Judge",
    "last_contains",
    "last_matches",
    "meta_is",
    "predicate",
    "replies_in",
]


class Condition:
    """A named predicate ``ctx -> bool``."""

    __slots__ = ("_fn", "judges", "name")

    def __init__(self, fn: Callable[[Context], bool], name: str, judges: tuple[Judge, ...] = ()):
        self._fn = fn
        self.name = name
        self.judges = judges  # LLM judges this condition consults (for validation and tracing)

    def __call__(self, ctx: Context) -> bool:
        return bool(self._fn(ctx))

    def __and__(self, other: Condition) -> Condition:
        return Condition(lambda c: self(c) and other(c), f"({self.name} & {other.name})", self.judges + other.judges)

    def __or__(self, other: Condition) -> Condition:
        return Condition(lambda c: self(c) or other(c), f"({self.name} | {other.name})", self.judges + other.judges)

    def __invert__(self) -> Condition:
        return Condition(lambda c: not self(c), f"not {self.name}", self.judges)

    def __repr__(self) -> str:
        return f"Condition({self.name})"

    def __str__(self) -> str:
        return self.name


def _last(ctx: Context, kind: Kind | str | None) -> Message | None:
    return ctx.history.last(kind)


def last_contains(
    text: str, *, kind: Kind | str | None = None, ignore_case: bool = False, name: str | None = None
) -> Condition:
    """The last message (of ``kind``, if given) contains ``text``; ``name`` overrides the label."""
    needle = text.lower() if ignore_case else text
    where = f"last {Kind(kind).value}" if kind else "last message"

    def check(ctx: Context) -> bool:
        m = _last(ctx, kind)
        if m is None:
            return False
        hay = m.content.lower() if ignore_case else m.content
        return needle in hay

    return Condition(check, name or f"{where} contains {text!r}")


def last_matches(pattern: str, *, kind: Kind | str | None = None, flags: int = 0, name: str | None = None) -> Condition:
    """The last message (of ``kind``, if given) matches the regular expression (``re.search``)."""
    compiled = re.compile(pattern, flags)
    where = f"last {Kind(kind).value}" if kind else "last message"

    def check(ctx: Context) -> bool:
        m = _last(ctx, kind)
        return m is not None and compiled.search(m.content) is not None

    return Condition(check, name or f"{where} ~ /{pattern}/")


def meta_is(key: str, value: Any = True, *, kind: Kind | str = Kind.TOOL, name: str | None = None) -> Condition:
    """The last message of ``kind`` (default: tool) reports ``meta[key] == value``."""

    def check(ctx: Context) -> bool:
        m = _last(ctx, kind)
        return m is not None and m.meta.get(key) == value

    return Condition(check, name or f"{Kind(kind).value}.{key} == {value!r}")


def replies_in(state: str, *, at_least: int) -> Condition:
    """The model has replied at least ``at_least`` times in ``state`` during this run.

    It counts the LLM messages the history attributes to ``state`` (discarded resamples are not
    messages, so they do not count). A budget for a state, as data: with
    ``Transition(ANY, give_up, when=failed & replies_in("Error", at_least=2))`` ahead of the rule
    into Error, the third failure ends the loop instead of asking again.

    Raises:
        ValueError: ``at_least`` is below 1 (the condition would always hold).

    >>> from stateflow.context import Context
    >>> from stateflow.messages import History, Kind, Message
    >>> ctx = Context(task="q", history=History([Message("assistant", "a", "Error", Kind.LLM, "x")]))
    >>> replies_in("Error", at_least=1)(ctx), replies_in("Error", at_least=2)(ctx), replies_in("Solve", at_least=1)(ctx)
    (True, False, False)
    """
    if at_least < 1:
        raise ValueError(f"replies_in({state!r}): at_least must be >= 1, got {at_least}")

    def check(ctx: Context) -> bool:
        return sum(1 for m in ctx.history if m.kind == Kind.LLM and m.state == state) >= at_least

    return Condition(check, f"{at_least}+ replies in {state}")


def predicate(fn: Callable[[Context], bool], name: str | None = None) -> Condition:
    """Any predicate over the run context (history, state, vars, env)."""
    return Condition(fn, name or getattr(fn, "__name__", "predicate"))


@dataclass(frozen=True, eq=False)
class Judge:
    """An LLM-judged classification of the history.

    The judge asks a model ``question`` about the history and expects one of ``choices``. The
    answer is computed at most once per transition decision and shared by every rule that
    reads it, so ``answer_is("yes")`` and ``answer_is("no")`` on two rules cost one call.
    An answer matching no choice makes every ``answer_is`` false (the next rule decides);
    it is recorded in the trace, never guessed.

    Attributes:
        question: the classification question (answered from the history).
        choices: allowed one-word answers.
        profile: the profile serving the judge; ``None`` uses the state's assignment.
        name: a short label for diagrams and traces.
    """

    question: str
    choices: Sequence[str] = ("yes", "no")
    profile: str | None = None
    name: str = "judge"

    def __post_init__(self) -> None:
        if len(self.choices) < 2:
            raise ValueError("Judge needs at least two choices")

    def answer_is(self, *choices: str) -> Condition:
        """A condition that holds when the judge's answer is one of ``choices``."""
        unknown = [c for c in choices if c not in self.choices]
        if unknown:
            raise ValueError(f"Judge {self.name!r}: {unknown} not among its choices {list(self.choices)}")
        wanted = set(choices)

        def check(ctx: Context) -> bool:
            if ctx.ask is None:
                raise RuntimeError("this context cannot consult LLM judges (no runtime attached)")
            return ctx.ask(self) in wanted

        label = "|".join(choices)
        return Condition(check, f"{self.name} says {label}", (self,))

    def parse(self, reply: str) -> str | None:
        """The first choice that appears as a word in ``reply`` (case-insensitive), else None."""
        words = re.findall(r"[A-Za-z_][\w-]*", reply.lower())
        by_lower = {c.lower(): c for c in self.choices}
        for w in words:
            if w in by_lower:
                return by_lower[w]
        return None
