"""A parsed and compiled spec: declared states, their texts and the behaviour's DFA.

:class:`AgentSpec` is what the monitor, the grammar builder, the example checker and the
StateFlow importer consume. Building one validates the spec and computes load-time warnings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from stateflow.spec.automaton import SpecDFA, compile_formula
from stateflow.spec.errors import SpecError
from stateflow.spec.model import Spec, StateDecl, formula_atoms
from stateflow.spec.parser import parse_spec, read_spec_file
from stateflow.spec.segment import Segmenter

__all__ = ["AgentSpec", "common_prefix"]


def common_prefix(texts: Sequence[str]) -> str:
    """Longest common prefix of the given texts (``""`` for none)."""
    if not texts:
        return ""
    lo, hi = min(texts), max(texts)
    n = 0
    while n < len(lo) and lo[n] == hi[n]:
        n += 1
    return lo[:n]


@dataclass(frozen=True)
class AgentSpec:
    """A validated spec with its automaton.

    Attributes:
        spec: the parsed spec.
        dfa: the minimal trimmed DFA of its behaviour.
        warnings: load-time warnings (ambiguous texts, empty correction prefixes, unused states).
    """

    spec: Spec
    dfa: SpecDFA
    warnings: tuple[str, ...] = ()

    @classmethod
    def from_spec(cls, spec: Spec) -> AgentSpec:
        """Compile a parsed spec.

        Raises:
            SpecError: the behaviour accepts no trace at all.
        """
        dfa = compile_formula(spec.behavior, spec.state_names)
        if dfa.is_empty:
            raise SpecError(f"behaviour of {spec.name!r} accepts no trace (contradictory and/not?)", source=spec.source)
        return cls(spec, dfa, _warnings(spec, dfa))

    @classmethod
    def from_text(cls, text: str, source: str = "<string>") -> AgentSpec:
        """Parse and compile spec text."""
        return cls.from_spec(parse_spec(text, source))

    @classmethod
    def from_file(cls, path: str | Path) -> AgentSpec:
        """Parse and compile a spec file."""
        return cls.from_spec(read_spec_file(path))

    @cached_property
    def segmenter(self) -> Segmenter:
        """Splits text on this spec's state texts."""
        return Segmenter({n: s.text for n, s in self.spec.states.items()})

    @property
    def name(self) -> str:
        """The spec's ``define`` name."""
        return self.spec.name

    def state(self, name: str) -> StateDecl:
        """A declared state by name (``KeyError`` lists the valid names)."""
        try:
            return self.spec.states[name]
        except KeyError:
            raise KeyError(f"unknown state {name!r}; declared: {', '.join(self.spec.states)}") from None

    def texts(self, names: Sequence[str]) -> list[str]:
        """Texts of the given states."""
        return [self.spec.states[n].text for n in names]

    def correction_prefix(self, q: int) -> str:
        """Longest common prefix of the texts of the states valid at ``q``."""
        return common_prefix(self.texts(self.dfa.next_states(q)))


def _warnings(spec: Spec, dfa: SpecDFA) -> tuple[str, ...]:
    out: list[str] = []
    texts = {n: s.text for n, s in spec.states.items()}
    for a, ta in texts.items():
        for b, tb in texts.items():
            if a != b and ta in tb:
                where = "a prefix" if tb.startswith(ta) else "a substring"
                out.append(
                    f"text {ta!r} of {a} is {where} of {tb!r} of {b}: matching is line-anchored and "
                    "longest-first, but a model writing it mid-line will not switch state"
                )
    unused = [n for n in spec.states if n not in formula_atoms(spec.behavior)]
    if unused:
        out.append(f"declared but never used in the behaviour: {', '.join(unused)}")
    seen: set[tuple[str, ...]] = set()
    for q in range(dfa.num_states):
        nxt = dfa.next_states(q)
        if len(nxt) > 1 and nxt not in seen and not common_prefix([texts[n] for n in nxt]):
            seen.add(nxt)
            out.append(
                f"valid next states {', '.join(nxt)} share no common text prefix: a correction there "
                "needs a forced choice"
            )
    return tuple(out)
