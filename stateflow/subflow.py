"""Subflows: a :class:`~stateflow.flow.Flow` as a state's output function.

A state ``State("Fix", Prompt("Repair the query."), fix_flow)`` runs the output functions before
the subflow, then the subflow's states with their own rules, then (after the subflow reached one
of its final states) the outputs after it, and only then the parent's rules leaving ``Fix``.

How it runs: before a run, :func:`expand_subflows` rewrites the flow into an equivalent flat one
whose inner states are named ``Outer.Inner`` (nested subflows: ``A.B.C``). The one episode loop
then runs every inner state like any other state, so the path, the trace, usage by state,
checkpoints (a run resumes in the middle of a subflow), streamed events and reports all see
the inner states under their dotted names, without a second loop to keep in step. The rewrite:

* ``Outer`` keeps the outputs before the subflow; one unconditional rule enters the subflow's
  initial state ``Outer.<initial>``;
* each inner state ``S`` becomes ``Outer.S`` with the inner rules, in their order (an inner
  ``ANY`` means the subflow's own non-final states, never the parent's);
* each inner final state becomes a non-final *exit* state ``Outer.F`` running its own outputs
  and then the outputs after the subflow; the parent's rules that left ``Outer`` leave every
  exit state instead, in their order (a parent ``ANY`` covers the parent's states and the
  exits, not the subflow's inner states: the subflow's own rules decide inside it).

The subflow's ``system_message`` and ``max_transitions`` are not used: a run has one system
message and one transition bound (the outer flow's), which counts inner transitions too.

Example:
    >>> from stateflow import Flow, LLM, Prompt, State, Transition
    >>> draft, done = State("Draft", Prompt("Write."), LLM()), State("Done", final=True)
    >>> inner = Flow("write", initial=draft, transitions=[Transition(draft, done)])
    >>> work, end = State("Work", inner), State("End", final=True)
    >>> outer = Flow("outer", initial=work, transitions=[Transition(work, end)])
    >>> list(expand_subflows(outer).states)
    ['Work', 'Work.Draft', 'Work.Done', 'End']
"""

from __future__ import annotations

from stateflow.flow import ANY, Flow, State, Transition

__all__ = ["SEPARATOR", "expand_subflows", "has_subflows"]

#: Joins a subflow state's name to the inner state's name (``Outer.Inner``). User state names
#: cannot contain it, so an expanded name never clashes with a state of the parent.
SEPARATOR = "."


def has_subflows(flow: Flow) -> bool:
    """Whether any state of ``flow`` runs a subflow."""
    return any(st.subflow is not None for st in flow.states.values())


def _nested_state(name: str, outputs: tuple, *, final: bool, description: str) -> State:
    # Expanded names contain the separator, which the public constructor refuses for user
    # states (so they cannot clash); the state is otherwise built as usual.
    st = State("x", *outputs, final=final, description=description)
    object.__setattr__(st, "name", name)
    return st


def expand_subflows(flow: Flow) -> Flow:
    """The flat flow that runs ``flow`` with its subflows inlined (``flow`` itself without any).

    Raises:
        FlowDefinitionError: the expanded flow is invalid (it should not be when the parts are
            valid; the message names the rules as expanded).
    """
    if not has_subflows(flow):
        return flow
    table: dict[str, State] = {}
    rules: list[Transition] = []
    exits: dict[str, list[str]] = {}  # subflow state -> its exit states (stand in for it as a source)
    inner_names: set[str] = set()
    for name, st in flow.states.items():
        inner = st.subflow
        if inner is None:
            table[name] = st
            continue
        inner = expand_subflows(inner)  # nested subflows first: A.B.C
        at = st.outputs.index(next(o for o in st.outputs if isinstance(o, Flow)))
        before, after = st.outputs[:at], st.outputs[at + 1 :]
        table[name] = _nested_state(name, before, final=False, description=st.description)
        prefix = name + SEPARATOR
        for iname, ist in inner.states.items():
            full = prefix + iname
            outs = ist.outputs + after if ist.final else ist.outputs
            table[full] = _nested_state(full, outs, final=st.final and ist.final, description=ist.description)
            inner_names.add(full)
        exits[name] = [prefix + n for n, s in inner.states.items() if s.final]
        rules.append(Transition(name, prefix + inner.initial))
        inner_open = [prefix + n for n, s in inner.states.items() if not s.final]
        for rule in inner.transitions:
            srcs = inner_open if rule.sources is ANY else [prefix + s for s in rule.sources]  # type: ignore[union-attr]
            rules.append(Transition(srcs, prefix + rule.target, rule.when))
    # The parent's own states (exit states standing in for a subflow state) are what a parent
    # rule may leave; a final subflow state is final through its exits (no parent rule leaves it).
    parent_open = [x for name, st in flow.states.items() if not st.final for x in exits.get(name, [name])]
    for rule in flow.transitions:
        named = [] if rule.sources is ANY else [x for s in rule.sources for x in exits.get(s, [s])]  # type: ignore[union-attr]
        srcs = parent_open if rule.sources is ANY else named
        srcs = [s for s in srcs if not table[s].final]
        if srcs:
            rules.append(Transition(srcs, rule.target, rule.when))
    return Flow(
        flow.name,
        initial=table[flow.initial],
        states=list(table.values()),
        transitions=rules,
        max_transitions=flow.max_transitions,
        system_message=flow.system_message,
        description=flow.description,
    )
