"""The StateFlow model: states, transitions as data, and a validated flow definition.

A flow is the sextuple of the paper: states S, the initial state s0, final states F, output
functions per state (see :mod:`stateflow.outputs`) and the transition function δ, written as an
ordered list of ``Transition(source, target, when)`` rules. After a state's output functions ran,
the rules leaving it are checked top to bottom and the first that holds picks the next state.

Defining a flow has no side effects; it is validated as a whole when constructed and every
problem is reported at once. Running it is the runtime's job (:mod:`stateflow.runtime`).

>>> from stateflow import Flow, State, Transition, Prompt, LLM, last_contains
>>> ask = State("Ask", Prompt("Answer in one word."), LLM())
>>> done = State("Done", final=True)
>>> flow = Flow("tiny", initial=ask, transitions=[
...     Transition(ask, done, when=last_contains("ok")),
...     Transition(ask, ask),
... ])
>>> [s.name for s in flow.states.values()]
['Ask', 'Done']
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from stateflow.conditions import Condition, Judge
from stateflow.context import Context
from stateflow.errors import ConditionError, FlowDefinitionError, StateDefinitionError, StateFlowError
from stateflow.outputs import LLM, OUTPUT_TYPES, OutputFunction, Prompt
from stateflow.parallel import Parallel

__all__ = ["ANY", "Flow", "FlowWarning", "State", "Transition"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")


class FlowWarning(UserWarning):
    """A flow is valid but probably not what was meant (e.g. an unreachable state)."""


class _AnySource:
    """Sentinel source: the rule applies to every non-final state."""

    def __repr__(self) -> str:
        return "ANY"


ANY: Final = _AnySource()


@dataclass(frozen=True)
class State:
    """A state and the output functions run, in order, each time it is entered.

    Args:
        name: unique within the flow; letters, digits, ``_`` and ``-`` (it names AutoGen agents).
        *outputs: output functions (``Prompt``, ``LLM``, ``Tool``, ...), or at most one
            :class:`Flow`: a subflow whose states run inside this state (see
            :mod:`stateflow.subflow`).
        final: reaching this state ends the run (after its outputs, if any, ran).
        description: one line for diagrams and reports.
    """

    name: str
    outputs: tuple[OutputFunction, ...] = ()
    final: bool = False
    description: str = ""

    def __init__(self, name: str, *outputs: OutputFunction, final: bool = False, description: str = ""):
        if not isinstance(name, str) or not _NAME.match(name):
            raise StateDefinitionError(
                str(name), [f"state name {name!r} must match {_NAME.pattern} (letters, digits, _ and -)"]
            )
        for out in outputs:
            if not isinstance(out, (*OUTPUT_TYPES, Parallel, Flow)):
                raise StateDefinitionError(
                    name,
                    [
                        f"state {name!r}: {out!r} is not an output function "
                        "(Prompt, LLM, Tool, AutoGenAgent, Human, Parallel or a Flow)"
                    ],
                )
        if sum(isinstance(o, Flow) for o in outputs) > 1:
            raise StateDefinitionError(name, [f"state {name!r}: at most one subflow per state; chain two states"])
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "outputs", tuple(outputs))
        object.__setattr__(self, "final", final)
        object.__setattr__(self, "description", description)

    @property
    def instruction(self) -> str:
        """The state's prompter texts joined (the SF_Agent view's private system message)."""
        return "\n\n".join(o.text for o in self.outputs if isinstance(o, Prompt))

    def with_outputs(self, *outputs: OutputFunction) -> State:
        """The same state (name, final flag, description) running ``outputs`` instead.

        >>> State("Solve", Prompt("a"), LLM()).with_outputs(Prompt("b")).outputs
        (Prompt(text='b'),)
        """
        return State(self.name, *outputs, final=self.final, description=self.description)

    def with_instruction(self, *lines: str) -> State:
        """The same state with ``lines`` appended to its first :class:`Prompt`, one per line.

        Used by ablations that change what a state is told (e.g. No_Verify tells Solve to submit).

        >>> State("Solve", Prompt("Write the query."), LLM()).with_instruction("Then submit.").instruction
        'Write the query.\\nThen submit.'

        Raises:
            FlowDefinitionError: the state has no prompt to amend.
        """
        at = next((i for i, o in enumerate(self.outputs) if isinstance(o, Prompt)), None)
        if at is None:
            raise StateDefinitionError(self.name, [f"state {self.name!r} has no Prompt to add instructions to"])
        if not lines:
            return self
        first = self.outputs[at]
        assert isinstance(first, Prompt)
        amended = Prompt("\n".join([first.text, *lines]))
        return self.with_outputs(*self.outputs[:at], amended, *self.outputs[at + 1 :])

    @property
    def subflow(self) -> Flow | None:
        """The :class:`Flow` this state runs inside it, if any."""
        return next((o for o in self.outputs if isinstance(o, Flow)), None)

    def __repr__(self) -> str:
        kinds = ", ".join(o.label for o in self.outputs)
        return f"State({self.name!r}{', final' if self.final else ''}{': ' + kinds if kinds else ''})"


StateRef = State | str


def _ref(s: StateRef) -> str:
    return s.name if isinstance(s, State) else s


@dataclass(frozen=True)
class Transition:
    """A rule ``(source, target, when)``.

    Args:
        source: a state, a list of states, or ``ANY`` (every non-final state).
        target: the next state when the rule holds.
        when: a :class:`~stateflow.conditions.Condition`; ``None`` means always.
    """

    sources: tuple[str, ...] | _AnySource
    target: str
    when: Condition | None = None
    state_objects: tuple[State, ...] = field(default=(), compare=False, repr=False)

    def __init__(
        self,
        source: StateRef | Sequence[StateRef] | _AnySource,
        target: StateRef,
        when: Condition | None = None,
    ):
        if source is ANY:
            sources: tuple[str, ...] | _AnySource = ANY
        elif isinstance(source, (State, str)):
            sources = (_ref(source),)
        else:
            sources = tuple(_ref(s) for s in source)
        if when is not None and not isinstance(when, Condition):
            raise TypeError(f"Transition to {_ref(target)!r}: when= must be a Condition, got {type(when).__name__}")
        objects = [
            s
            for s in ([source] if isinstance(source, (State, str)) else ([] if source is ANY else list(source)))
            if isinstance(s, State)
        ]
        if isinstance(target, State):
            objects.append(target)
        object.__setattr__(self, "sources", sources)
        object.__setattr__(self, "target", _ref(target))
        object.__setattr__(self, "when", when)
        object.__setattr__(self, "state_objects", tuple(objects))

    def applies_to(self, state: str) -> bool:
        return self.sources is ANY or state in self.sources  # type: ignore[operator]

    @property
    def label(self) -> str:
        return self.when.name if self.when is not None else "always"

    def __str__(self) -> str:
        src = "ANY" if self.sources is ANY else "|".join(self.sources)  # type: ignore[arg-type]
        return f"{src} -> {self.target} [{self.label}]"


@dataclass(frozen=True)
class Flow:
    """A validated StateFlow definition.

    Args:
        name: the flow's name (shown in diagrams, traces and reports).
        initial: the initial state s0.
        transitions: the rules, in priority order.
        states: every state; derived from ``initial`` and the rules when omitted.
        max_transitions: bound on transitions per run (stops loops); the run ends with
            ``stop_reason="max_transitions"`` when it is reached.
        system_message: the shared system message of the StateFlow view's agent (and the
            prefix of every SF_Agent agent's system message).
        description: free text for diagrams and reports.

    Raises:
        FlowDefinitionError: listing every problem found.
    """

    name: str
    initial: str
    states: Mapping[str, State]
    transitions: tuple[Transition, ...]
    max_transitions: int = 30
    system_message: str = ""
    description: str = ""
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def __init__(
        self,
        name: str,
        *,
        initial: State,
        transitions: Iterable[Transition],
        states: Iterable[State] | None = None,
        max_transitions: int = 30,
        system_message: str = "",
        description: str = "",
    ):
        rules = tuple(transitions)
        problems: list[str] = []
        table: dict[str, State] = {}
        given = list(states) if states is not None else [initial]
        for st in given:
            if st.name in table and table[st.name] is not st:
                problems.append(f"duplicate state name {st.name!r}")
            table.setdefault(st.name, st)
        if initial.name not in table:
            problems.append(f"initial state {initial.name!r} is not among the states")
            table[initial.name] = initial
        if max_transitions < 1:
            problems.append(f"max_transitions must be >= 1, got {max_transitions}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "initial", initial.name)
        object.__setattr__(self, "states", table)
        object.__setattr__(self, "transitions", rules)
        object.__setattr__(self, "max_transitions", max_transitions)
        object.__setattr__(self, "system_message", system_message)
        object.__setattr__(self, "description", description)
        found_warnings = self._validate(problems, derive_states=states is None, rules=rules)
        object.__setattr__(self, "warnings", tuple(found_warnings))
        if problems:
            raise FlowDefinitionError(name, problems)
        for w in found_warnings:
            warnings.warn(f"flow {name!r}: {w}", FlowWarning, stacklevel=2)

    @property
    def label(self) -> str:
        """How a state running this flow as a subflow lists it among its outputs."""
        return f"flow[{self.name}]"

    # -- validation -----------------------------------------------------------------------------

    def _validate(self, problems: list[str], *, derive_states: bool, rules: tuple[Transition, ...]) -> list[str]:
        table: dict[str, State] = self.states  # type: ignore[assignment]
        self._collect_rule_states(rules, table, derive_states, problems)
        if derive_states:
            ordered = self._reading_order(self.initial, rules, table)
            table.clear()
            table.update(ordered)
        names = list(table)
        for i, rule in enumerate(rules):
            where = f"transition #{i + 1} ({rule})"
            if rule.target not in table:
                problems.append(f"{where}: unknown target state {rule.target!r}; states: {names}")
            if rule.sources is not ANY:
                for s in rule.sources:  # type: ignore[union-attr]
                    if s not in table:
                        problems.append(f"{where}: unknown source state {s!r}; states: {names}")
                    elif table[s].final:
                        problems.append(f"{where}: source {s!r} is final; a run stops there, so the rule is dead")
        # Shadowing: a rule after an unconditional rule from the same source can never fire.
        for name, st in table.items():
            if st.final:
                continue
            open_ended = None
            for i, rule in enumerate(rules):
                if not rule.applies_to(name):
                    continue
                if open_ended is not None:
                    problems.append(
                        f"transition #{i + 1} ({rule}) can never fire from {name!r}: "
                        f"transition #{open_ended + 1} before it has no condition"
                    )
                    break
                if rule.when is None:
                    open_ended = i
        # Every non-final state needs a way out.
        for name, st in table.items():
            if not st.final and not any(r.applies_to(name) for r in rules):
                problems.append(f"non-final state {name!r} has no outgoing transition")
        finals = [n for n, s in table.items() if s.final]
        if not finals:
            problems.append("no final state (mark one with final=True)")
        if problems:
            return []
        graph = self._successors()
        reach = self._reachable(self.initial, graph)
        if not any(f in reach for f in finals):
            problems.append(f"no final state is reachable from the initial state {self.initial!r}")
        found = []
        for name in names:
            if name not in reach:
                found.append(f"state {name!r} is unreachable from {self.initial!r}")
        return found

    @staticmethod
    def _collect_rule_states(
        rules: tuple[Transition, ...], table: dict[str, State], derive: bool, problems: list[str]
    ) -> None:
        # Rules keep the State objects they were built from; when the flow lists no states,
        # those objects define the state table.
        for rule in rules:
            for ref in rule.state_objects:
                if ref.name in table and table[ref.name] is not ref:
                    problems.append(f"two different states are named {ref.name!r}")
                elif ref.name not in table and derive:
                    table[ref.name] = ref

    @staticmethod
    def _reading_order(initial: str, rules: tuple[Transition, ...], table: dict[str, State]) -> dict[str, State]:
        # The order a flow's figure is read in: breadth-first from the initial state along the
        # rules that name their sources (in rule order), then states reached only through ANY
        # rules, then the final states. Diagrams, tables and fingerprints list states this way.
        order, todo = [initial], [initial]
        while todo:
            here = todo.pop(0)
            for rule in rules:
                named = rule.sources is not ANY and here in rule.sources  # type: ignore[operator]
                target = table.get(rule.target)
                if named and target is not None and not target.final and rule.target not in order:
                    order.append(rule.target)
                    todo.append(rule.target)
        rest = [n for n in table if n not in order]
        order += [n for n in rest if not table[n].final] + [n for n in rest if table[n].final]
        return {n: table[n] for n in order if n in table}

    def _successors(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {n: [] for n in self.states}
        for name, st in self.states.items():
            if st.final:
                continue
            for rule in self.transitions:
                if rule.applies_to(name) and rule.target not in out[name]:
                    out[name].append(rule.target)
        return out

    @staticmethod
    def _reachable(start: str, graph: Mapping[str, list[str]]) -> set[str]:
        seen, todo = {start}, [start]
        while todo:
            for nxt in graph.get(todo.pop(), []):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    # -- queries --------------------------------------------------------------------------------

    def rules_from(self, state: str) -> list[Transition]:
        """The rules that may fire after ``state``, in priority order."""
        return [r for r in self.transitions if r.applies_to(state)]

    def decide(self, ctx: Context, *, step: int | None = None) -> Transition | None:
        """The first rule leaving ``ctx.state`` whose condition holds (None if none does).

        Args:
            ctx: the run context the conditions read.
            step: the index of the run's last step, named in a :class:`ConditionError`.

        Raises:
            ConditionError: a condition raised (a ``StateFlowError`` such as a judge's
                ``LLMError`` passes through unchanged).
        """
        for number, rule in enumerate(self.transitions, start=1):
            if not rule.applies_to(ctx.state):
                continue
            if rule.when is None:
                return rule
            try:
                holds = rule.when(ctx)
            except StateFlowError:
                raise
            except Exception as err:  # user code: say which rule, where and when
                raise ConditionError(f"transition #{number}: {rule}", ctx.state, step, err) from err
            if holds:
                return rule
        return None

    def judges(self) -> list[Judge]:
        """Every LLM judge used by a rule (for model validation)."""
        return [j for r in self.transitions if r.when is not None for j in r.when.judges]

    def llm_states(self) -> list[State]:
        return [s for s in self.states.values() if any(isinstance(o, LLM) for o in s.outputs)]

    # -- variants (ablations) -------------------------------------------------------------------

    def variant(
        self,
        name: str,
        *,
        replace: Iterable[State] = (),
        drop: Iterable[StateRef] = (),
        reroute: Mapping[StateRef, StateRef] | None = None,
        transitions: Iterable[Transition] | None = None,
        initial: State | None = None,
    ) -> Flow:
        """A new flow derived from this one (ablations such as No_Verify, or other variants).

        Rules keep their order and conditions; each is rebuilt on the variant's states, so a
        replaced state is used everywhere its name appears.

        Args:
            name: the variant's name.
            replace: states whose name matches an existing state replace it (in its place).
            drop: states to remove. A dropped state disappears from the sources of every rule
                (a rule left without sources is removed); a rule targeting it is removed, unless
                ``reroute`` names a substitute.
            reroute: ``{dropped state: substitute}``: rules that targeted the dropped state now
                target the substitute (e.g. No_Observe: ``Init -> Observe`` becomes
                ``Init -> Solve``).
            transitions: a new rule list instead (then ``drop`` and ``reroute`` only remove states).
            initial: a new initial state.

        Raises:
            FlowDefinitionError: the variant is not a valid flow (e.g. a reroute to an unknown
                or dropped state), listing every problem.

        >>> from stateflow import ANY, Flow, LLM, Prompt, State, Transition, last_contains
        >>> ask, check = State("Ask", Prompt("Answer."), LLM()), State("Check", Prompt("Sure?"), LLM())
        >>> done = State("Done", final=True)
        >>> full = Flow("full", initial=ask, transitions=[
        ...     Transition(ANY, done, when=last_contains("FINAL")),
        ...     Transition(ask, check),
        ...     Transition(check, ask),
        ... ])
        >>> [str(r) for r in full.variant("no-check", drop=[check], reroute={check: ask}).transitions]
        ["ANY -> Done [last message contains 'FINAL']", 'Ask -> Ask [always]']
        """
        dropped = {_ref(d) for d in drop}
        moves = {_ref(k): _ref(v) for k, v in (reroute or {}).items()}
        problems = [f"reroute of {k!r}: {k!r} is not dropped" for k in moves if k not in dropped]
        problems += [f"reroute of {k!r} to {v!r}: that state is dropped too" for k, v in moves.items() if v in dropped]
        problems += [f"drop: unknown state {d!r}; states: {list(self.states)}" for d in dropped if d not in self.states]
        table = {n: s for n, s in self.states.items() if n not in dropped}
        for st in replace:
            table[st.name] = st
        problems += [f"reroute to unknown state {v!r}; states: {list(table)}" for v in moves.values() if v not in table]
        if problems:
            raise FlowDefinitionError(name, problems)
        if transitions is None:
            kept = []
            for r in self.transitions:
                target = moves.get(r.target, r.target)
                if target in dropped:
                    continue
                if r.sources is ANY:
                    kept.append(Transition(ANY, table[target], r.when))
                    continue
                srcs = [table[s] for s in r.sources if s not in dropped]  # type: ignore[union-attr]
                if srcs:
                    kept.append(Transition(srcs, table[target], r.when))
            rules: Iterable[Transition] = kept
        else:
            rules = transitions
        start = initial or table[self.initial]
        return Flow(
            name,
            initial=start,
            states=list(table.values()),
            transitions=rules,
            max_transitions=self.max_transitions,
            system_message=self.system_message,
            description=self.description,
        )
