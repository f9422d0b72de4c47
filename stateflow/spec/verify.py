"""Model-check a flow against an agent spec: does every bounded path of the flow keep the spec?

:func:`verify` explores every path a run of ``flow`` can take, up to its transition bound, in
product with the spec's automaton (breadth-first), and answers with a :class:`Verdict`: the spec
*holds* on every path, or it is *violated*, with the shortest path that breaks it.

What a path is (the runtime's semantics, see :mod:`stateflow.episode.loop`):

* a path is the sequence of states a run visits, starting with the initial state; a run makes at
  most ``bound`` transitions (``flow.max_transitions`` unless given), so a path has at most
  ``bound + 1`` states of the flow;
* it ends in a final state (*complete*), or in a non-final state after ``bound`` transitions
  (*cut off*: the run stops with ``stop_reason="max_transitions"``);
* subflows are expanded as they run (:func:`~stateflow.subflow.expand_subflows`): their states
  are visited as ``Outer.Inner``; the subflow's transitions count against the one bound;
* a :class:`~stateflow.parallel.Parallel` whose branches include subflows runs each subflow
  branch as a whole nested run while the state's outputs run. The path visits them in branch
  order as ``State.branch.Inner`` states, right after ``State``, each bounded by its own
  ``max_transitions`` (a nested run's own bound; its transitions do not count against the
  parent's). Branches run concurrently; their interleaving is not modelled, only the branch order
  the merge sees. ``LLM`` and ``Tool`` branches visit no state.

The abstraction of conditions. A rule's condition reads the run (history, tools, vars, judges),
which the graph does not know, so each condition is a *free choice*: it may hold or not on any
visit. Only what is decidable from the graph alone is used:

1. a rule without a condition always holds, so the rules after it from the same source never
   fire (:class:`~stateflow.flow.Flow` already rejects such rules when they are written down);
2. rules are tried in declaration order, so a later rule from the same source carrying the *same*
   condition object as an earlier one never fires (when it holds, the earlier rule won);
3. a state whose rules are all conditional may find that none holds: the run then fails with
   :class:`~stateflow.errors.NoTransitionError`. Such a run has no path to check; it is left out.

The alphabet. By default each visited state is read by the spec under its own name, so the spec
declares the flow's state names. ``alphabet`` maps a state to another spec symbol, or to
``None`` to hide it (the automaton does not move). Every state the exploration can visit must be
readable: a state that is neither a declared spec state nor mapped is an error, never skipped.

When a path breaks the spec. A path violates the spec when the automaton cannot read one of its
states, when it is complete and the automaton is not accepting at its end, or (only with
``cut_off="complete"``) when it is cut off and the automaton is not accepting there. With the
default ``cut_off="prefix"`` a cut-off path only has to be a valid prefix: the spec is read as a
safety property over what the run did before the bound stopped it. The counterexample is a path
prefix of fewest states that proves the violation: up to the first unreadable state, or the whole
complete (or cut-off) path.

Example:
    >>> from stateflow import ANY, Flow, LLM, Prompt, State, Transition, last_contains
    >>> from stateflow.spec import AgentSpec
    >>> ask, check, done = State("Ask", LLM()), State("Check", LLM()), State("Done", final=True)
    >>> flow = Flow("tiny", initial=ask, max_transitions=5, transitions=[
    ...     Transition(ANY, done, when=last_contains("FINAL")),
    ...     Transition(ask, check),
    ...     Transition(check, ask),
    ... ])
    >>> spec = AgentSpec.from_text(
    ...     "(define checked (:states Ask Check Done) (:behavior (until (next Ask Check) Done)))")
    >>> verdict = verify(flow, spec)
    >>> verdict.holds, verdict.counterexample.path
    (False, ('Ask', 'Done'))
    >>> verdict.counterexample.reason
    "the spec does not allow 'Done' after Ask"
    >>> fixed = Flow("tiny", initial=ask, max_transitions=5, transitions=[
    ...     Transition(check, done, when=last_contains("FINAL")),
    ...     Transition(ask, check),
    ...     Transition(check, ask),
    ... ])
    >>> print(verify(fixed, spec).summary())  # doctest: +NORMALIZE_WHITESPACE
    holds: every path of 'tiny' with at most 5 transitions keeps spec 'checked'
    (a cut-off path must be a valid prefix; 8 product states)
"""

from __future__ import annotations

import itertools
import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from stateflow.errors import StateFlowError
from stateflow.flow import Flow
from stateflow.graph import mermaid_id, to_mermaid
from stateflow.parallel import Parallel
from stateflow.spec.compiled import AgentSpec
from stateflow.subflow import SEPARATOR, expand_subflows

__all__ = [
    "Counterexample",
    "CutOff",
    "Step",
    "Verdict",
    "VerifyError",
    "abstraction_notes",
    "choices",
    "counterexample_mermaid",
    "verify",
]

CutOff = Literal["prefix", "complete"]

_CUT_OFF_TEXT = {"prefix": "a cut-off path must be a valid prefix", "complete": "a cut-off path must be accepted"}


class VerifyError(StateFlowError):
    """The flow cannot be checked against this spec as asked (an unreadable state, a bad bound).

    Attributes:
        problems: every problem found, one line each.
    """

    def __init__(self, flow: str, spec: str, problems: Sequence[str]):
        self.problems = tuple(problems)
        super().__init__(f"verify flow {flow!r} against spec {spec!r}: " + "; ".join(self.problems))


@dataclass(frozen=True)
class Step:
    """One state of a counterexample path and how the run got there.

    Attributes:
        state: the state visited (``Outer.Inner`` inside a subflow, ``State.branch.Inner`` in a
            parallel subflow branch).
        symbol: what the spec reads there (``None``: hidden).
        rule: how the run entered it: ``"start"``, ``"#N <rule>"`` (the flow rule, numbered in
            priority order as in diagrams and errors) or ``"branch <name>"``.
        number: ``N``, the rule's 1-based position in the (subflow-expanded) flow's rules; 0 for
            the start and for a branch entry.
    """

    state: str
    symbol: str | None
    rule: str
    number: int = 0


@dataclass(frozen=True)
class Counterexample:
    """The shortest path that breaks the spec.

    Attributes:
        steps: the states visited, with the rule that led into each.
        reason: why the spec rejects it, in one sentence.
    """

    steps: tuple[Step, ...]
    reason: str

    @property
    def path(self) -> tuple[str, ...]:
        """The states visited, in order."""
        return tuple(s.state for s in self.steps)

    @property
    def trace(self) -> tuple[str, ...]:
        """What the spec read (hidden states left out)."""
        return tuple(s.symbol for s in self.steps if s.symbol is not None)

    def __str__(self) -> str:
        lines = [f"  {i}. {s.state}  ({s.rule})" for i, s in enumerate(self.steps, 1)]
        return "\n".join([*lines, f"  {self.reason}"])


@dataclass(frozen=True)
class Verdict:
    """The answer of :func:`verify`.

    Attributes:
        flow: the flow's name.
        spec: the spec's name.
        holds: every bounded path keeps the spec.
        bound: the transition bound explored.
        cut_off: how a path cut off by the bound was judged (``"prefix"`` or ``"complete"``).
        abstraction: how conditions were read, one line each (see :func:`abstraction_notes`).
        counterexample: the shortest violating path, when the spec is violated.
        explored: product states (flow position x automaton state) visited.
        hidden: the states the alphabet hides from the spec.
    """

    flow: str
    spec: str
    holds: bool
    bound: int
    cut_off: CutOff
    abstraction: tuple[str, ...]
    counterexample: Counterexample | None = None
    explored: int = 0
    hidden: tuple[str, ...] = ()

    def summary(self) -> str:
        """One line: the verdict with its bound (and the counterexample's length)."""
        if self.holds:
            return (
                f"holds: every path of {self.flow!r} with at most {self.bound} transitions keeps spec "
                f"{self.spec!r} ({_CUT_OFF_TEXT[self.cut_off]}; {self.explored} product states)"
            )
        assert self.counterexample is not None
        return (
            f"violated: spec {self.spec!r} fails on a path of {len(self.counterexample.steps)} states of "
            f"{self.flow!r} (bound {self.bound})"
        )

    def __str__(self) -> str:
        lines = [self.summary(), "abstraction:", *(f"  - {a}" for a in self.abstraction)]
        if self.hidden:
            lines.append(f"  - hidden from the spec: {', '.join(self.hidden)}")
        if self.counterexample is not None:
            lines += ["counterexample:", str(self.counterexample)]
        return "\n".join(lines)


# -- the flow's moves under the abstraction -----------------------------------------------------


def choices(flow: Flow, state: str) -> list[tuple[int, str]]:
    """The rules that may fire after ``state`` under the abstraction: ``(number, target)`` pairs.

    ``number`` is the rule's 1-based position in ``flow.transitions``. Conditions are free
    choices, except that an unconditional rule ends the list and a rule repeating an earlier
    rule's condition object is left out (it can never win). Final states have none.

    >>> from stateflow import ANY, Flow, LLM, State, Transition, last_contains
    >>> a, b, end = State("A", LLM()), State("B", LLM()), State("End", final=True)
    >>> done = last_contains("done")
    >>> f = Flow("f", initial=a, transitions=[
    ...     Transition(ANY, end, when=done), Transition(a, b, when=done), Transition(a, b),
    ...     Transition(b, a)])
    >>> choices(f, "A"), choices(f, "B"), choices(f, "End")
    ([(1, 'End'), (3, 'B')], [(1, 'End'), (4, 'A')], [])
    """
    if flow.states[state].final:
        return []
    out: list[tuple[int, str]] = []
    tried: set[int] = set()
    for number, rule in enumerate(flow.transitions, start=1):
        if not rule.applies_to(state):
            continue
        if rule.when is None:
            out.append((number, rule.target))
            break
        if id(rule.when) in tried:
            continue
        tried.add(id(rule.when))
        out.append((number, rule.target))
    return out


def abstraction_notes(flow: Flow) -> tuple[str, ...]:
    """How :func:`verify` reads ``flow``'s conditions, one line per decision, for the verdict.

    >>> from stateflow import Flow, LLM, State, Transition
    >>> a, end = State("A", LLM()), State("End", final=True)
    >>> abstraction_notes(Flow("f", initial=a, transitions=[Transition(a, end)]))[0]
    'paths are the states visited; subflows expanded as they run'
    """
    notes = ["paths are the states visited; subflows expanded as they run"]
    free = sorted({r.when.name for r in flow.transitions if r.when is not None})
    if free:
        notes.append(f"free choices (may hold or not on any visit): {', '.join(free)}")
    always = [f"#{i} {r}" for i, r in enumerate(flow.transitions, 1) if r.when is None]
    if always:
        notes.append(f"always hold (later rules from the same source never fire): {', '.join(always)}")
    notes.append("a later rule with the same condition as an earlier one from its source never fires")
    notes.append("a run where no rule holds fails (NoTransitionError) and has no path to check")
    return tuple(notes)


@dataclass(frozen=True)
class _Machine:
    """One flat flow as the exploration runs it."""

    flow: Flow
    bound: int
    moves: Mapping[str, tuple[tuple[str, str, int], ...]]  # state -> ((target, rule label, number), ...)
    branches: Mapping[str, tuple[tuple[str, int], ...]]  # state -> ((branch name, machine index), ...)


_Frame = tuple[int, str, int, int]  # (machine index, state, transitions made, next branch)
_Position = tuple[_Frame, ...]


class _Explorer:
    """The flow's positions and moves: a stack of frames, one per nested (branch) run."""

    def __init__(self, flow: Flow, bound: int):
        self.machines: list[_Machine] = []
        self._add(flow, bound)

    def _add(self, flow: Flow, bound: int) -> int:
        flat = expand_subflows(flow)
        index = len(self.machines)
        self.machines.append(_Machine(flat, bound, {}, {}))
        moves = {s: tuple((t, f"#{n} {flat.transitions[n - 1]}", n) for n, t in choices(flat, s)) for s in flat.states}
        branches: dict[str, tuple[tuple[str, int], ...]] = {}
        for name, st in flat.states.items():
            found: list[tuple[str, int]] = []
            for out in st.outputs:
                if isinstance(out, Parallel):
                    for bname, branch in zip(out.names, out.branches, strict=True):
                        if isinstance(branch, Flow):
                            found.append((bname, self._add(branch, branch.max_transitions)))
            if found:
                branches[name] = tuple(found)
        self.machines[index] = _Machine(flat, bound, moves, branches)
        return index

    def start(self) -> _Position:
        return ((0, self.machines[0].flow.initial, 0, 0),)

    def name(self, pos: _Position) -> str:
        """The visited state's name as the trace shows it (``S.branch.Inner`` in a branch)."""
        parts: list[str] = []
        for depth, (mi, state, _, _) in enumerate(pos):
            if depth + 1 < len(pos):
                parent = self.machines[mi]
                _, _, _, nxt = pos[depth]
                branch_name = parent.branches[state][nxt - 1][0]
                parts += [state, branch_name]
            else:
                parts.append(state)
        return SEPARATOR.join(parts)

    def states(self) -> list[str]:
        """Every state name the exploration may visit (for checking the alphabet)."""
        out: list[str] = []

        def walk(mi: int, prefix: str) -> None:
            m = self.machines[mi]
            for s in m.flow.states:
                out.append(prefix + s)
                for bname, child in m.branches.get(s, ()):
                    walk(child, f"{prefix}{s}{SEPARATOR}{bname}{SEPARATOR}")

        walk(0, "")
        return out

    def moves(self, pos: _Position) -> tuple[list[tuple[_Position, str, int]], str | None]:
        """``([(next position, rule label, rule number), ...], ending)``: ending is ``"final"`` or ``"cut"`` when
        the path ends here (no moves), else ``None``."""
        frames = list(pos)
        while True:
            mi, state, count, branch = frames[-1]
            machine = self.machines[mi]
            subs = machine.branches.get(state, ())
            if branch < len(subs):
                bname, child = subs[branch]
                frames[-1] = (mi, state, count, branch + 1)
                entry = (child, self.machines[child].flow.initial, 0, 0)
                return [((*frames, entry), f"branch {bname}", 0)], None
            if machine.flow.states[state].final:
                ending = "final"
            elif count >= machine.bound:
                ending = "cut"
            else:
                nxt = [((*frames[:-1], (mi, t, count + 1, 0)), label, n) for t, label, n in machine.moves[state]]
                return nxt, None
            if len(frames) == 1:
                return [], ending
            frames.pop()  # a branch's nested run ended: its state goes on


def _read_alphabet(
    explorer: _Explorer, spec: AgentSpec, alphabet: Mapping[str, str | None] | None, flow: str
) -> dict[str, str | None]:
    declared = spec.spec.state_names
    visited = explorer.states()
    given = dict(alphabet or {})
    problems = [
        f"alphabet maps {k!r}, which is no state of the flow; states: {', '.join(visited)}"
        for k in given
        if k not in visited
    ]
    table: dict[str, str | None] = {}
    for name in visited:
        if name in given:
            symbol = given[name]
            if symbol is not None and symbol not in declared:
                problems.append(
                    f"alphabet maps {name!r} to {symbol!r}, which the spec does not declare; "
                    f"declared: {', '.join(declared)}"
                )
        elif name in declared:
            symbol = name
        else:
            symbol = None
            problems.append(
                f"state {name!r} is not a state the spec declares; map it to one (--map {name}=SYMBOL) "
                f"or hide it (--map {name}=)"
            )
        table[name] = symbol
    if problems:
        raise VerifyError(flow, spec.name, problems)
    return table


def verify(
    flow: Flow,
    spec: AgentSpec,
    *,
    bound: int | None = None,
    alphabet: Mapping[str, str | None] | None = None,
    cut_off: CutOff = "prefix",
) -> Verdict:
    """Check every path of ``flow`` with at most ``bound`` transitions against ``spec``.

    Args:
        flow: the flow (subflows and parallel subflow branches are expanded as they run).
        spec: the compiled spec; its automaton reads the visited states.
        bound: the transition bound; ``flow.max_transitions`` when omitted.
        alphabet: ``state -> spec symbol`` (``None`` hides the state) for states whose name is
            not the spec's; other states are read under their own name.
        cut_off: ``"prefix"``: a path the bound cuts off only has to be a valid prefix of the
            spec; ``"complete"``: it must be a complete accepted trace too (for specs that say
            "eventually").

    Returns:
        A :class:`Verdict`: holds, or violated with a counterexample of fewest states.

    Raises:
        VerifyError: ``bound`` below 1, or a visited state the spec cannot read (all listed).
    """
    limit = flow.max_transitions if bound is None else bound
    if limit < 1:
        raise VerifyError(flow.name, spec.name, [f"bound must be >= 1, got {limit}"])
    if cut_off not in ("prefix", "complete"):
        raise VerifyError(flow.name, spec.name, [f"cut_off must be 'prefix' or 'complete', got {cut_off!r}"])
    explorer = _Explorer(flow, limit)
    symbols = _read_alphabet(explorer, spec, alphabet, flow.name)
    dfa = spec.dfa
    notes = abstraction_notes(flow)
    hidden = tuple(n for n, s in symbols.items() if s is None)

    def verdict(cex: Counterexample | None, explored: int) -> Verdict:
        return Verdict(flow.name, spec.name, cex is None, limit, cut_off, notes, cex, explored, hidden)

    # BFS over (position, automaton state). Violations are queued like nodes, at the depth of the
    # path that shows them, so the first one dequeued is a shortest one.
    Node = tuple[_Position, int]
    parent: dict[Node, tuple[Node | None, str, int]] = {}
    # (node, or None for a violation one step after prev; prev; rule label; rule number; name; reason)
    queue: deque[tuple[Node | None, Node | None, str, int, str, str]] = deque()

    def read(q: int, name: str) -> int | None:
        symbol = symbols[name]
        return q if symbol is None else dfa.step(q, symbol)

    def steps_to(node: Node | None, tail: list[Step]) -> tuple[Step, ...]:
        out = list(tail)
        while node is not None:
            prev, rule, number = parent[node]
            name = explorer.name(node[0])
            out.append(Step(name, symbols[name], rule, number))
            node = prev
        return tuple(reversed(out))

    start = explorer.start()
    first = explorer.name(start)
    q0 = read(dfa.start, first)
    if q0 is None:
        reason = f"the spec does not allow the run to start in {first!r}"
        return verdict(Counterexample((Step(first, symbols[first], "start"),), reason), 0)
    parent[(start, q0)] = (None, "start", 0)
    queue.append(((start, q0), None, "", 0, "", ""))
    while queue:
        node, prev, rule, number, name, reason = queue.popleft()
        if node is None:  # a violation found one step after prev
            tail = [Step(name, symbols[name], rule, number)]
            return verdict(Counterexample(steps_to(prev, tail), reason), len(parent))
        pos, q = node
        moves, ending = explorer.moves(pos)
        here = explorer.name(pos)
        if ending == "final" and not dfa.may_stop(q):
            reason = f"the run ends in {here!r} where the spec does not allow it to end"
            return verdict(Counterexample(steps_to(node, []), reason), len(parent))
        if ending == "cut" and cut_off == "complete" and not dfa.may_stop(q):
            reason = (
                f"the bound of {limit} transitions stops the run in {here!r}, where the spec does not allow it to end"
            )
            return verdict(Counterexample(steps_to(node, []), reason), len(parent))
        for nxt_pos, label, n in moves:
            nxt_name = explorer.name(nxt_pos)
            q2 = read(q, nxt_name)
            if q2 is None:
                seen = _shown(steps_to(node, []))
                where = f"after {seen}" if seen else "at the start (every state before it is hidden)"
                why = f"the spec does not allow {symbols[nxt_name]!r} {where}"
                queue.append((None, node, label, n, nxt_name, why))
                continue
            child = (nxt_pos, q2)
            if child not in parent:
                parent[child] = (node, label, n)
                queue.append((child, None, "", 0, "", ""))
    return verdict(None, len(parent))


def _shown(steps: Sequence[Step]) -> str:
    read = [s.symbol for s in steps if s.symbol is not None]
    return " ".join(read[-6:]) if len(read) <= 6 else "... " + " ".join(read[-6:])


_LINK = re.compile(r'^\s*(\S+?)(?:\(\( \)\))? -->(?:\|"[^"]*"\|)? (\S+)$')


def counterexample_mermaid(flow: Flow, counterexample: Counterexample) -> str:
    """The flow's Mermaid diagram (:func:`~stateflow.graph.to_mermaid`) with the path drawn in red.

    The edges the path takes are thick and red, its states filled red; the last state (where the
    spec broke) has a thick border. States of parallel branches are not in the diagram.

    >>> from stateflow import Flow, LLM, State, Transition
    >>> a, end = State("A", LLM()), State("End", final=True)
    >>> f = Flow("f", initial=a, transitions=[Transition(a, end)])
    >>> cex = Counterexample((Step("A", "A", "start"), Step("End", "End", "#1 A -> End [always]")), "x")
    >>> print(counterexample_mermaid(f, cex).splitlines()[-3:])
    ['    classDef path fill:#fdd,stroke:#c00', '    class s_A,s_End path', '    style s_End stroke-width:4px']
    """
    lines = to_mermaid(flow).rstrip("\n").split("\n")
    ids = [mermaid_id(s) for s in counterexample.path]
    pairs = set(itertools.pairwise(ids))
    taken = []
    link = 0
    for line in lines:
        m = _LINK.match(line)
        if m is None:
            continue
        if (m.group(1), m.group(2)) in pairs:
            taken.append(link)
        link += 1
    known = {mermaid_id(s) for s in expand_subflows(flow).states}
    on_path = list(dict.fromkeys(i for i in ids if i in known))
    if taken:
        lines.append(f"    linkStyle {','.join(map(str, taken))} stroke:#c00,stroke-width:3px")
    lines.append("    classDef path fill:#fdd,stroke:#c00")
    if on_path:
        lines.append(f"    class {','.join(on_path)} path")
        lines.append(f"    style {ids[-1] if ids[-1] in known else on_path[-1]} stroke-width:4px")
    return "\n".join(lines) + "\n"
