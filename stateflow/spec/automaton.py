"""Compile a behaviour formula to a trimmed, minimal DFA over declared state names.

Pipeline: formula -> NFA (Thompson construction; ``until_N`` unrolled into N optional copies)
-> DFA (subset construction) -> minimise (partition refinement) -> trim (drop states that
cannot reach acceptance) -> renumber breadth-first from the start.

``and``/``not`` are compiled by determinising their operands, combining the complete DFAs
(product / complement over the declared states) and embedding the result back as an NFA piece.

Because the result is trimmed, every prefix the DFA can read extends to an accepted trace:
"the DFA has not fallen off" is exactly "the trace is a valid prefix".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from stateflow.spec.model import Always, And, Atom, Eventually, Formula, Next, Not, Or, Until

__all__ = ["SpecDFA", "compile_formula"]


@dataclass(frozen=True)
class SpecDFA:
    """A deterministic automaton whose edges are labelled with declared state names.

    Automaton states are integers ``0..n-1`` with ``0`` the start; they are *not* the declared
    states (the same declared state may be reached in several automaton states).

    Attributes:
        alphabet: declared state names in declaration order.
        transitions: ``q -> {declared state -> q'}``; missing entries mean "invalid here".
        accepting: automaton states where a run may stop.
    """

    alphabet: tuple[str, ...]
    transitions: Mapping[int, Mapping[str, int]]
    accepting: frozenset[int]
    start: int = 0

    @property
    def num_states(self) -> int:
        """Number of automaton states."""
        return len(self.transitions)

    @property
    def num_edges(self) -> int:
        """Number of labelled edges."""
        return sum(len(e) for e in self.transitions.values())

    @property
    def is_empty(self) -> bool:
        """True when the behaviour accepts no trace at all."""
        return not self.accepting

    def next_states(self, q: int) -> tuple[str, ...]:
        """Declared states valid after automaton state ``q``, in declaration order."""
        return tuple(self.transitions[q])

    def step(self, q: int, state: str) -> int | None:
        """The automaton state after reading ``state`` in ``q``; ``None`` if invalid there."""
        return self.transitions[q].get(state)

    def may_stop(self, q: int) -> bool:
        """A run may end in ``q``."""
        return q in self.accepting

    def must_stop(self, q: int) -> bool:
        """A run must end in ``q`` (accepting, nothing may follow)."""
        return q in self.accepting and not self.transitions[q]

    def run(self, trace: Iterable[str]) -> int | None:
        """The automaton state after reading the whole trace, or ``None`` if it falls off."""
        q: int | None = self.start
        for s in trace:
            q = self.transitions[q].get(s)
            if q is None:
                return None
        return q

    def accepts(self, trace: Iterable[str]) -> bool:
        """The trace is a complete valid run."""
        q = self.run(trace)
        return q is not None and q in self.accepting

    def accepts_prefix(self, trace: Iterable[str]) -> bool:
        """The trace can still be extended into a valid run."""
        return self.run(trace) is not None

    def first_violation(self, trace: Sequence[str]) -> int | None:
        """Index of the first step that is invalid, ``len(trace)`` if the trace is a valid but
        unfinished prefix, or ``None`` when the trace is accepted."""
        q = self.start
        for i, s in enumerate(trace):
            nxt = self.transitions[q].get(s)
            if nxt is None:
                return i
            q = nxt
        return None if q in self.accepting else len(trace)


# -- NFA construction --------------------------------------------------------------------------


class _NFA:
    """Thompson NFA under construction: epsilon edges and labelled edges between int states."""

    def __init__(self, alphabet: tuple[str, ...]):
        self.alphabet = alphabet
        self.eps: list[list[int]] = []
        self.sym: list[list[tuple[str, int]]] = []

    def new(self) -> int:
        self.eps.append([])
        self.sym.append([])
        return len(self.eps) - 1

    def build(self, f: Formula) -> tuple[int, int]:
        """Add a piece for ``f``; returns its (entry, exit) states."""
        if isinstance(f, Atom):
            s, e = self.new(), self.new()
            self.sym[s].append((f.name, e))
            return s, e
        if isinstance(f, Next):
            s, e = self.build(f.parts[0])
            for part in f.parts[1:]:
                ps, pe = self.build(part)
                self.eps[e].append(ps)
                e = pe
            return s, e
        if isinstance(f, Or):
            s, e = self.new(), self.new()
            for part in f.parts:
                ps, pe = self.build(part)
                self.eps[s].append(ps)
                self.eps[pe].append(e)
            return s, e
        if isinstance(f, Always):
            return self.star(f.body)
        if isinstance(f, Until):
            if f.bound is None:
                s, e = self.star(f.body)
            else:
                s = e = self.new()
                exits = [s]
                for _ in range(f.bound):  # bounded loop: N optional copies in a chain
                    ps, pe = self.build(f.body)
                    self.eps[e].append(ps)
                    e = pe
                    exits.append(e)
                e = self.new()
                for x in exits:
                    self.eps[x].append(e)
            gs, ge = self.build(f.then)
            self.eps[e].append(gs)
            return s, ge
        if isinstance(f, Eventually):
            s = self.new()
            for a in self.alphabet:
                self.sym[s].append((a, s))
            bs, be = self.build(f.body)
            self.eps[s].append(bs)
            return s, be
        if isinstance(f, Not):
            d = _complete(_determinize_formula(f.body, self.alphabet), self.alphabet)
            return self.embed(d.transitions, frozenset(d.transitions) - d.accepting)
        if isinstance(f, And):
            d = _complete(_determinize_formula(f.parts[0], self.alphabet), self.alphabet)
            for part in f.parts[1:]:
                d = _product(d, _complete(_determinize_formula(part, self.alphabet), self.alphabet))
            return self.embed(d.transitions, d.accepting)
        raise TypeError(f"not a formula: {f!r}")

    def star(self, body: Formula) -> tuple[int, int]:
        s, e = self.new(), self.new()
        bs, be = self.build(body)
        self.eps[s] += [bs, e]
        self.eps[be] += [bs, e]
        return s, e

    def embed(self, trans: Mapping[int, Mapping[str, int]], accepting: Iterable[int]) -> tuple[int, int]:
        ids = {q: self.new() for q in trans}
        for q, edges in trans.items():
            for a, r in edges.items():
                self.sym[ids[q]].append((a, ids[r]))
        e = self.new()
        for q in accepting:
            self.eps[ids[q]].append(e)
        return ids[0], e


# -- determinise, minimise, trim ----------------------------------------------------------------


@dataclass(frozen=True)
class _RawDFA:
    transitions: dict[int, dict[str, int]]
    accepting: frozenset[int]


def _determinize(nfa: _NFA, start: int, end: int) -> _RawDFA:
    def closure(states: Iterable[int]) -> frozenset[int]:
        seen = set(states)
        stack = list(seen)
        while stack:
            for t in nfa.eps[stack.pop()]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        return frozenset(seen)

    first = closure([start])
    index = {first: 0}
    order = [first]
    trans: dict[int, dict[str, int]] = {}
    i = 0
    while i < len(order):
        cur = order[i]
        moves: dict[str, set[int]] = {}
        for q in cur:
            for a, r in nfa.sym[q]:
                moves.setdefault(a, set()).add(r)
        edges: dict[str, int] = {}
        for a in nfa.alphabet:
            if a in moves:
                nxt = closure(moves[a])
                if nxt not in index:
                    index[nxt] = len(order)
                    order.append(nxt)
                edges[a] = index[nxt]
        trans[i] = edges
        i += 1
    accepting = frozenset(index[S] for S in order if end in S)
    return _RawDFA(trans, accepting)


def _determinize_formula(f: Formula, alphabet: tuple[str, ...]) -> _RawDFA:
    nfa = _NFA(alphabet)
    s, e = nfa.build(f)
    return _determinize(nfa, s, e)


def _complete(d: _RawDFA, alphabet: tuple[str, ...]) -> _RawDFA:
    """Add a sink so every state has an edge for every symbol."""
    sink = len(d.transitions)
    trans = {q: {a: edges.get(a, sink) for a in alphabet} for q, edges in d.transitions.items()}
    if any(sink in edges.values() for edges in trans.values()):
        trans[sink] = {a: sink for a in alphabet}
    return _RawDFA(trans, d.accepting)


def _product(x: _RawDFA, y: _RawDFA) -> _RawDFA:
    """Intersection of two complete DFAs over the same alphabet (reachable part, start = 0)."""
    index = {(0, 0): 0}
    order = [(0, 0)]
    trans: dict[int, dict[str, int]] = {}
    i = 0
    while i < len(order):
        p, q = order[i]
        edges: dict[str, int] = {}
        for a, p2 in x.transitions[p].items():
            pair = (p2, y.transitions[q][a])
            if pair not in index:
                index[pair] = len(order)
                order.append(pair)
            edges[a] = index[pair]
        trans[i] = edges
        i += 1
    acc = frozenset(index[(p, q)] for (p, q) in order if p in x.accepting and q in y.accepting)
    return _RawDFA(trans, acc)


def _minimise(d: _RawDFA, alphabet: tuple[str, ...]) -> _RawDFA:
    """Moore partition refinement on the completed DFA, then drop the dead class."""
    full = _complete(d, alphabet)
    states = list(full.transitions)
    block = {q: int(q in full.accepting) for q in states}
    while True:
        sig = {q: (block[q], tuple(block[full.transitions[q][a]] for a in alphabet)) for q in states}
        ids: dict[tuple, int] = {}
        new_block = {q: ids.setdefault(sig[q], len(ids)) for q in states}
        if len(ids) == len(set(block.values())):
            break
        block = new_block
    trans = {block[q]: {a: block[r] for a, r in full.transitions[q].items()} for q in states}
    acc = frozenset(block[q] for q in full.accepting)
    # live = can reach an accepting class
    live = set(acc)
    changed = True
    while changed:
        changed = False
        for q, edges in trans.items():
            if q not in live and any(r in live for r in edges.values()):
                live.add(q)
                changed = True
    start = block[0]
    if start not in live:
        return _RawDFA({0: {}}, frozenset())
    # renumber breadth-first from the start, edges in alphabet order, dead targets dropped
    order = [start]
    index = {start: 0}
    queue = deque([start])
    while queue:
        q = queue.popleft()
        for a in alphabet:
            r = trans[q][a]
            if r in live and r not in index:
                index[r] = len(order)
                order.append(r)
                queue.append(r)
    out = {index[q]: {a: index[r] for a in alphabet if (r := trans[q][a]) in live} for q in order}
    return _RawDFA(out, frozenset(index[q] for q in order if q in acc))


def compile_formula(f: Formula, alphabet: Sequence[str]) -> SpecDFA:
    """Compile a behaviour over the given declared states to a minimal trimmed DFA.

    Args:
        f: the behaviour formula (its atoms must be in ``alphabet``).
        alphabet: declared state names, in declaration order.

    Returns:
        The automaton. If the behaviour accepts nothing, it has one non-accepting state and
        no edges (:attr:`SpecDFA.is_empty`).

    Example:
        >>> from stateflow.spec.model import Atom, Next, Until
        >>> d = compile_formula(Until(Next((Atom("A"), Atom("B"))), Atom("C")), ["A", "B", "C"])
        >>> d.accepts(["A", "B", "C"]), d.accepts(["A", "C"]), d.next_states(0)
        (True, False, ('A', 'C'))
    """
    sigma = tuple(alphabet)
    d = _minimise(_determinize_formula(f, sigma), sigma)
    frozen = {q: MappingProxyType(dict(e)) for q, e in d.transitions.items()}
    return SpecDFA(alphabet=sigma, transitions=MappingProxyType(frozen), accepting=d.accepting)
