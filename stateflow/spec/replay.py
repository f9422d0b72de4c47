"""Counterexamples you can run: find replies and tool results that drive a flow down a path.

:func:`~stateflow.spec.verify.verify` treats conditions as free choices, so a counterexample may
need a condition that no run can meet (a submit right after ``SHOW TABLES``). :func:`replay`
settles that for one counterexample: given, per state, the ways a visit may end (an
:class:`Outcome`: the model's reply and the tool result the state leaves last), it searches for
one outcome per visited state such that, in a history built from them, the flow's own rules
(:meth:`~stateflow.flow.Flow.decide`, the runtime's first-match decision) pick exactly the
counterexample's next state at every step. The answer is a :class:`Replay`: *realizable*, with
the outcomes, or *unmet* at the first step where no outcome makes the wanted rule fire (what
fired instead is listed), so a false alarm of the abstraction is reported as one.

:func:`scripted_run` then runs the flow for real (the one episode loop, AutoGen included) with
the model replaced by a :class:`~stateflow.backends.scripted.ScriptedLLM` speaking the chosen
replies and each state's tools by a test double returning the chosen results, stopping after
the path's last state: its ``RunResult.path`` is the counterexample, a regression test to keep.

Limits: conditions see the synthetic history, the run's ``vars`` and an empty blackboard (a
condition reading a counter a real tool keeps, e.g. the environment's turn count, sees zero);
LLM judges cannot be consulted offline (an outcome whose decision needs one fails); paths
through parallel branches are not replayed, and :func:`scripted_run` takes flows without
subflows.

Example:
    >>> from stateflow import ANY, Flow, LLM, State, Tool, Transition, last_contains
    >>> from stateflow.outputs import ToolResult
    >>> from stateflow.spec import AgentSpec
    >>> from stateflow.spec.verify import verify
    >>> act = State("Act", LLM(), Tool(lambda ctx: "ok", "run"))
    >>> end = State("End", final=True)
    >>> flow = Flow("act", initial=act, max_transitions=4, transitions=[
    ...     Transition(ANY, end, when=last_contains("DONE")), Transition(act, act)])
    >>> spec = AgentSpec.from_text("(define twice (:states Act End) (:behavior (next Act Act End)))")
    >>> cex = verify(flow, spec).counterexample
    >>> cex.path
    ('Act', 'End')
    >>> pool = {"Act": [Outcome("ran", "run it", ToolResult("ok")), Outcome("done", "stop", ToolResult("DONE"))]}
    >>> found = replay(flow, cex, pool)
    >>> found.realizable, [o.label for o in found.outcomes]
    (True, ['done', 'nothing'])
    >>> replay(flow, cex, {"Act": [Outcome("ran", "run it", ToolResult("ok"))]}).unmet.wanted
    "#1 ANY -> End [last message contains 'DONE']"
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stateflow.context import Context
from stateflow.errors import StateFlowError
from stateflow.flow import Flow, State
from stateflow.messages import History, Kind, Message
from stateflow.outputs import LLM, Prompt, Tool, ToolResult
from stateflow.parallel import Parallel
from stateflow.spec.compiled import AgentSpec
from stateflow.spec.verify import Counterexample, CutOff, Step, VerifyError, verify
from stateflow.subflow import expand_subflows, has_subflows

if TYPE_CHECKING:
    from stateflow.trace import RunResult

__all__ = ["Outcome", "Replay", "Unmet", "replay", "scripted_run", "shortest_replayable"]


@dataclass(frozen=True)
class Outcome:
    """One way a visit of a state may end.

    Attributes:
        label: a short name for reports (``"submit"``, ``"SELECT ok"``).
        reply: what the model says, for a state that calls one.
        tool: what the state's tools leave last, for a state that runs any (``None``: an empty
            result).
    """

    label: str
    reply: str = ""
    tool: ToolResult | None = None


@dataclass(frozen=True)
class Unmet:
    """No outcome of a state makes the counterexample's rule fire there.

    Attributes:
        index: position in the path of the state whose decision failed (0 = the first state).
        state: that state.
        wanted: the rule the path takes next (``"#N rule"``).
        tried: per outcome tried, what happened instead (``"label: #M rule fired"``).
    """

    index: int
    state: str
    wanted: str
    tried: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"step {self.index + 1} ({self.state}): no outcome makes {self.wanted} the first rule to hold; "
            + "; ".join(self.tried)
        )


@dataclass(frozen=True)
class Replay:
    """The answer of :func:`replay`.

    Attributes:
        counterexample: the path replayed.
        outcomes: one per visited state (the last state's too: its outputs run before the run
            stops), when realizable; empty otherwise.
        unmet: the first step no outcome can take, when not realizable.
    """

    counterexample: Counterexample
    outcomes: tuple[Outcome, ...] = ()
    unmet: Unmet | None = None

    @property
    def realizable(self) -> bool:
        """Some run takes the counterexample's path."""
        return self.unmet is None


_NOTHING = Outcome("nothing")


def _has_llm(state: State) -> bool:
    return any(isinstance(o, LLM) for o in state.outputs)


def _has_tool(state: State) -> bool:
    return any(not isinstance(o, (LLM, Prompt)) for o in state.outputs)


def _messages(state: State, outcome: Outcome) -> list[Message]:
    """What a visit of ``state`` ending in ``outcome`` appends (the parts decisions read)."""
    out = []
    if _has_llm(state):
        out.append(Message("assistant", "llm", state.name, Kind.LLM, outcome.reply))
    if _has_tool(state):
        result = outcome.tool or ToolResult("")
        out.append(Message("user", "tool", state.name, Kind.TOOL, result.content, meta=result.meta))
    return out


def _candidates(state: State, outcomes: Mapping[str, Sequence[Outcome]]) -> Sequence[Outcome]:
    given = outcomes.get(state.name)
    if given:
        return given
    return [_NOTHING]


def replay(
    flow: Flow,
    counterexample: Counterexample,
    outcomes: Mapping[str, Sequence[Outcome]],
    *,
    task: str = "",
    vars: Mapping[str, Any] | None = None,
    max_tries: int = 20_000,
) -> Replay:
    """Search outcomes that make the flow's rules take ``counterexample``'s path.

    Args:
        flow: the flow the counterexample came from.
        counterexample: from :func:`~stateflow.spec.verify.verify`.
        outcomes: ``state -> the ways a visit may end``; a state not listed ends with nothing
            (no reply, an empty tool result).
        task: the task text conditions may read.
        vars: the run's vars conditions may read.
        max_tries: decisions evaluated before giving up (backtracking is exhaustive below it).

    Returns:
        A :class:`Replay`: realizable with one outcome per visited state, or unmet at the first
        step (the deepest the search reached) with what fired instead of the wanted rule.

    Raises:
        StateFlowError: the path goes through a parallel branch, or ``max_tries`` ran out.
    """
    flat = expand_subflows(flow)
    steps = counterexample.steps
    if any(s.number == 0 for s in steps[1:]):
        raise StateFlowError("replay: paths through parallel branches are not replayed")
    base = dict(vars or {})
    deepest: list[Unmet] = []
    tries = 0

    def wanted(i: int) -> str:
        return steps[i + 1].rule

    def search(i: int, history: list[Message]) -> list[Outcome] | None:
        nonlocal tries
        state = flat.states[steps[i].state]
        if i == len(steps) - 1:
            return [_candidates(state, outcomes)[0]]
        tried = []
        for outcome in _candidates(state, outcomes):
            tries += 1
            if tries > max_tries:
                raise StateFlowError(f"replay: gave up after {max_tries} decisions (raise max_tries)")
            grown = history + _messages(state, outcome)
            ctx = Context(task=task, history=History(grown), state=state.name, vars=dict(base))
            try:
                rule = flat.decide(ctx)
            except (StateFlowError, RuntimeError) as err:  # e.g. a judge, which needs a model
                tried.append(f"{outcome.label}: {type(err).__name__}: {err}")
                continue
            number = None if rule is None else flat.transitions.index(rule) + 1
            if number == steps[i + 1].number:
                rest = search(i + 1, grown)
                if rest is not None:
                    return [outcome, *rest]
                tried.append(f"{outcome.label}: later steps cannot follow")
            else:
                fired = "no rule" if rule is None else f"#{number} {rule}"
                tried.append(f"{outcome.label}: {fired} fired")
        if not deepest or deepest[0].index < i:
            deepest[:] = [Unmet(i, state.name, wanted(i), tuple(tried))]
        return None

    found = search(0, [])
    if found is None:
        return Replay(counterexample, (), deepest[0])
    return Replay(counterexample, tuple(found))


def _scripted_state(state: State, results: Iterator[ToolResult]) -> State:
    """``state`` with its model call plain (no grammar, no resample) and its tools replaced by one
    double returning the next scheduled result."""
    outputs: list[Any] = []
    for out in state.outputs:
        if isinstance(out, Prompt):
            outputs.append(out)
        elif isinstance(out, LLM):
            outputs.append(LLM())
    if _has_tool(state):
        outputs.append(Tool(lambda ctx: next(results), "replayed"))
    return state.with_outputs(*outputs)


def scripted_run(
    flow: Flow, found: Replay, *, task: str = "replay", vars: Mapping[str, Any] | None = None
) -> RunResult:
    """Run ``flow`` down ``found``'s path with a scripted model and tool doubles.

    The run stops after the path's last state (``max_transitions`` = the path's transitions), so
    ``result.path`` equals the counterexample's path when the replay holds.

    Raises:
        StateFlowError: the replay is not realizable, or the flow has subflows.
    """
    from stateflow.backends.scripted import ScriptedLLM
    from stateflow.profiles import ModelProfile
    from stateflow.runtime import run

    if not found.realizable:
        raise StateFlowError(f"scripted_run: the counterexample cannot be replayed: {found.unmet}")
    if has_subflows(flow):
        raise StateFlowError("scripted_run: flows with subflows are not replayed yet; expand them by hand")
    path = found.counterexample.path
    replies = [o.reply for name, o in zip(path, found.outcomes, strict=True) if _has_llm(flow.states[name])]
    scheduled = iter(
        [o.tool or ToolResult("") for name, o in zip(path, found.outcomes, strict=True) if _has_tool(flow.states[name])]
    )
    doubles = [_scripted_state(st, scheduled) for st in flow.states.values() if not (st.final and not st.outputs)]
    scripted = flow.variant(f"{flow.name}-replay", replace=doubles)
    profile = ModelProfile(name="replay", model="replay", provider="scripted", api_key_env=None)
    return run(
        scripted,
        task,
        models=profile,
        scripts={"replay": ScriptedLLM(replies)},
        vars=dict(vars or {}),
        max_transitions=max(1, len(path) - 1),
    )


def shortest_replayable(
    flow: Flow,
    spec: AgentSpec,
    outcomes: Mapping[str, Sequence[Outcome]],
    *,
    bound: int | None = None,
    alphabet: Mapping[str, str | None] | None = None,
    cut_off: CutOff = "prefix",
    task: str = "",
    vars: Mapping[str, Any] | None = None,
    max_runs: int = 200_000,
    merge_key: Callable[[str, Sequence[Message]], Hashable] | None = None,
) -> Replay | None:
    """The shortest counterexample some run can take, searched over outcomes (not graph paths).

    Breadth-first over concrete runs: from each run prefix, every outcome of its current state
    gives the history a real run would have, and the flow's rules decide where it goes next. The
    first prefix that breaks the spec (the semantics of :func:`~stateflow.spec.verify.verify`,
    same bound, alphabet and cut-off reading) is a shortest one a run can take with these
    outcomes. ``None``: no run within the bound breaks the spec, with these outcomes (at once
    when :func:`~stateflow.spec.verify.verify` says the spec holds: every run's path is a graph
    path).

    Without ``merge_key`` every run prefix is kept apart, so the search grows as
    ``outcomes ** depth``. ``merge_key(state, history) -> key`` merges prefixes in the same state,
    automaton state and transition count whose keys are equal: the caller promises that the
    flow's conditions cannot tell such histories apart, now or later (e.g. they read only the
    last tool result and small reply counts;
    :func:`stateflow.tasks.kit.outcomes.intercode_key` is one for the InterCode flows).

    Example:
        >>> from stateflow import ANY, Flow, LLM, State, Transition, last_contains
        >>> from stateflow.spec import AgentSpec
        >>> setup, act = State("Setup", Tool(lambda ctx: "", "list")), State("Act", LLM())
        >>> end = State("End", final=True)
        >>> flow = Flow("f", initial=setup, transitions=[
        ...     Transition(ANY, end, when=last_contains("bye")), Transition(setup, act), Transition(act, act)])
        >>> from stateflow.spec.verify import verify
        >>> spec = AgentSpec.from_text(
        ...     "(define acted (:states Setup Act End) (:behavior (next Setup Act (until Act End))))")
        >>> pool = {"Setup": [Outcome("listed", tool=ToolResult("t1"))], "Act": [Outcome("bye", "bye")]}
        >>> verify(flow, spec).counterexample.path  # a graph path no run takes: Setup says no "bye"
        ('Setup', 'End')
        >>> shortest_replayable(flow, spec, pool) is None
        True

    Raises:
        VerifyError: a bad bound, or a state the spec cannot read.
        StateFlowError: the flow runs parallel subflow branches, or ``max_runs`` ran out.
    """
    if verify(flow, spec, bound=bound, alphabet=alphabet, cut_off=cut_off).holds:
        return None
    flat = expand_subflows(flow)
    fans = [o for st in flat.states.values() for o in st.outputs if isinstance(o, Parallel)]
    if any(isinstance(b, Flow) for fan in fans for b in fan.branches):
        raise StateFlowError("shortest_replayable: flows with parallel subflow branches are not searched")
    limit = flat.max_transitions if bound is None else bound
    if limit < 1:
        raise VerifyError(flow.name, spec.name, [f"bound must be >= 1, got {limit}"])
    given = dict(alphabet or {})
    declared = set(spec.spec.state_names)
    unreadable = [n for n in flat.states if given.get(n, n) is not None and given.get(n, n) not in declared]
    if unreadable:
        raise VerifyError(flow.name, spec.name, [f"state {n!r} is not a state the spec declares" for n in unreadable])
    dfa, base = spec.dfa, dict(vars or {})

    def read(q: int, name: str) -> int | None:
        symbol = given.get(name, name)
        return q if symbol is None else dfa.step(q, symbol)

    def found(steps: list[Step], chosen: list[Outcome], reason: str) -> Replay:
        last = flat.states[steps[-1].state]
        return Replay(Counterexample(tuple(steps), reason), (*chosen, _candidates(last, outcomes)[0]))

    first = flat.initial
    q0 = read(dfa.start, first)
    start = [Step(first, given.get(first, first), "start")]
    if q0 is None:
        return found(start, [], f"the spec does not allow the run to start in {first!r}")
    # a run prefix: (steps, outcomes chosen so far, history, automaton state)
    queue: deque[tuple[list[Step], list[Outcome], list[Message], int]] = deque([(start, [], [], q0)])
    merged: set[tuple[str, int, int, Hashable]] = set()
    runs = 0
    while queue:
        steps, chosen, history, q = queue.popleft()
        state = flat.states[steps[-1].state]
        if state.final or len(steps) - 1 >= limit:
            continue
        for outcome in _candidates(state, outcomes):
            runs += 1
            if runs > max_runs:
                raise StateFlowError(f"shortest_replayable: gave up after {max_runs} run prefixes (raise max_runs)")
            grown = history + _messages(state, outcome)
            ctx = Context(task=task, history=History(grown), state=state.name, vars=dict(base))
            try:
                rule = flat.decide(ctx)
            except (StateFlowError, RuntimeError):
                continue  # e.g. a judge: this outcome decides nothing offline
            if rule is None:
                continue  # the run fails (NoTransitionError): no path
            number = flat.transitions.index(rule) + 1
            nxt = rule.target
            step = Step(nxt, given.get(nxt, nxt), f"#{number} {rule}", number)
            path, picks = [*steps, step], [*chosen, outcome]
            q2 = read(q, nxt)
            if q2 is None:
                return found(path, picks, f"the spec does not allow {given.get(nxt, nxt)!r} here")
            target = flat.states[nxt]
            if target.final and not dfa.may_stop(q2):
                return found(path, picks, f"the run ends in {nxt!r} where the spec does not allow it to end")
            cut = not target.final and len(path) - 1 >= limit
            if cut and cut_off == "complete" and not dfa.may_stop(q2):
                return found(path, picks, f"the bound of {limit} transitions stops the run in {nxt!r}")
            if merge_key is not None:
                key = (nxt, q2, len(path), merge_key(nxt, grown))
                if key in merged:
                    continue
                merged.add(key)
            queue.append((path, picks, grown, q2))
    return None
