"""The parsed form of an agent spec: declared states and a behaviour formula.

Formulas are immutable trees. Positions (``line``/``col``) are kept for error messages but
ignored by equality, so two formulas compare equal when they mean the same tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "OPERATORS",
    "Always",
    "And",
    "Atom",
    "Eventually",
    "Formula",
    "Next",
    "Not",
    "Or",
    "Spec",
    "StateDecl",
    "Until",
    "formula_atoms",
    "formula_to_sexpr",
]

#: Operator names a behaviour may use (``until_N`` is ``until`` with a bound).
OPERATORS: tuple[str, ...] = ("next", "or", "until", "until_N", "always", "and", "not", "eventually")


@dataclass(frozen=True)
class StateDecl:
    """One declared state.

    Attributes:
        name: identifier used in the behaviour (``Action-Input``).
        text: the cue written before the content and the marker that detects the state.
        env_input: content comes from the environment (tool, user), not from the LLM.
        choices: allowed content values (``:output-constrs``); empty means free text.
        line, col: where the declaration starts.
    """

    name: str
    text: str
    env_input: bool = False
    choices: tuple[str, ...] = ()
    line: int = field(default=0, compare=False)
    col: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Atom:
    """A single declared state."""

    name: str
    line: int = field(default=0, compare=False)
    col: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Next:
    """Concatenation of the parts, in order."""

    parts: tuple[Formula, ...]


@dataclass(frozen=True)
class Or:
    """Union of the parts."""

    parts: tuple[Formula, ...]


@dataclass(frozen=True)
class And:
    """Intersection of the parts (optional operator)."""

    parts: tuple[Formula, ...]


@dataclass(frozen=True)
class Not:
    """Complement over all traces of declared states (optional operator)."""

    body: Formula


@dataclass(frozen=True)
class Until:
    """``body`` repeated zero or more times (at most ``bound`` when set), then ``then``."""

    body: Formula
    then: Formula
    bound: int | None = None


@dataclass(frozen=True)
class Always:
    """``body`` repeated zero or more times; a run may stop after any complete block."""

    body: Formula


@dataclass(frozen=True)
class Eventually:
    """Any trace, then ``body`` (optional operator)."""

    body: Formula


Formula = Atom | Next | Or | And | Not | Until | Always | Eventually


@dataclass(frozen=True)
class Spec:
    """A parsed agent spec.

    Attributes:
        name: the ``define`` name.
        states: declared states by name, in declaration order.
        behavior: the behaviour formula.
        source: where the spec came from (file path or ``<string>``).
    """

    name: str
    states: Mapping[str, StateDecl]
    behavior: Formula
    source: str = "<string>"

    @property
    def state_names(self) -> tuple[str, ...]:
        """Declared state names in declaration order (the automaton's alphabet)."""
        return tuple(self.states)

    @property
    def env_states(self) -> tuple[str, ...]:
        """Names of the env-input states."""
        return tuple(n for n, s in self.states.items() if s.env_input)

    def text(self, name: str) -> str:
        """The text (cue and marker) of a declared state."""
        return self.states[name].text


def formula_atoms(f: Formula) -> set[str]:
    """Names of every state a formula mentions."""
    if isinstance(f, Atom):
        return {f.name}
    if isinstance(f, Next | Or | And):
        return set().union(*(formula_atoms(p) for p in f.parts))
    if isinstance(f, Until):
        return formula_atoms(f.body) | formula_atoms(f.then)
    return formula_atoms(f.body)


def formula_to_sexpr(f: Formula) -> str:
    """Render a formula back to spec syntax (parsing the result gives an equal formula)."""
    if isinstance(f, Atom):
        return f.name
    if isinstance(f, Next | Or | And):
        op = {Next: "next", Or: "or", And: "and"}[type(f)]
        return f"({op} {' '.join(formula_to_sexpr(p) for p in f.parts)})"
    if isinstance(f, Until):
        op = "until" if f.bound is None else f"until_{f.bound}"
        return f"({op} {formula_to_sexpr(f.body)} {formula_to_sexpr(f.then)})"
    op = {Not: "not", Always: "always", Eventually: "eventually"}[type(f)]
    return f"({op} {formula_to_sexpr(f.body)})"
