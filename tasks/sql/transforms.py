"""Transforms of the SQL flow that are not the paper's: each is one lever's change.

Each function takes a flow and returns a new one (flows are immutable); which levers exist,
what they need and in which order they apply is data in :mod:`stateflow.tasks.sql.levers`.
Measured effects are in each docstring and in the lever records.
"""

from __future__ import annotations

import re
from dataclasses import replace as dc_replace

from stateflow.tasks.kit.actions import parse_action
from stateflow.tasks.kit.grammar import (
    ACTION_GBNF,
    ACTION_ONLY_GBNF,
    EXECUTE_ONLY_GBNF,
    THOUGHT_ACTION_GBNF,
)
from stateflow.tasks.kit.layout import state_question
from stateflow.tasks.kit.prompts import load_prompt
from stateflow.tasks.kit.tools import (
    repeats_last_action,
    restate_question,
    submit,
)
from stateflow.tasks.sql.flow import executed_statement
from stateflow.tasks.sql.grammar import (
    schema_action_grammar,
    schema_action_only_grammar,
    schema_thought_action_grammar,
)

from stateflow import ANY, LLM, Context, Flow, Prompt, State, Tool, Transition, replies_in
from stateflow.degenerate import DegenerateCut
from stateflow.repetition import RepeatGuard, repeated_action
from stateflow.stable_id import stable_id

__all__ = [
    "COLUMN_ORDER",
    "error_executes_only",
    "submit_on_success",
    "submits",
    "submits_or_repeats_last_action",
    "with_cut",
    "with_error_budget",
    "with_guard",
    "with_levers",
    "with_prefix_first",
    "with_question_last",
    "with_schema_grammar",
    "with_similar_examples",
    "with_solve_examples",
    "without_examples",
    "without_thoughts",
]

COLUMN_ORDER = (
    "- Put the columns in the order the question names them (the answer is compared row by row, as whole tuples)."
)

_WORKED_EXAMPLE = re.compile(r"^Examples? of this step.*?(?=^Now your step)", re.DOTALL | re.MULTILINE)


def _rebuilt(
    flow: Flow,
    states: dict[str, State],
    rules: list[Transition] | tuple[Transition, ...],
    system_message: str | None = None,
) -> Flow:
    """``flow`` with these states (a new one may be added) and rules; name, limits and messages
    kept unless ``system_message`` replaces the system message.

    :meth:`Flow.variant` only replaces or drops states; a derivation that adds one builds here.
    """
    return Flow(
        flow.name,
        initial=states[flow.initial],
        states=list(states.values()),
        transitions=rules,
        max_transitions=flow.max_transitions,
        system_message=flow.system_message if system_message is None else system_message,
        description=flow.description,
    )


_THOUGHT_LINE = re.compile(r"^Thought:.*\n", re.MULTILINE)
_TWO_LINES = "Every reply has exactly two lines:"
_NO_THOUGHT_GRAMMAR = {THOUGHT_ACTION_GBNF: ACTION_GBNF, EXECUTE_ONLY_GBNF: ACTION_ONLY_GBNF}


def without_thoughts(flow: Flow) -> Flow:
    """Every reply is one line, ``Action: ...``, with no Thought before it (not the paper's flow).

    The system message's reply format and the worked examples lose their Thought lines, and
    each Thought/Action grammar becomes the action-only one. Why a switch: on the development
    sample the 1.5B model's one-shot answers were better without the Thought (docs/results.md,
    issue 15); the Thought is where it plans joins the question does not need.

    Raises:
        ValueError: the system message does not state the two-line format this rewrites (the
            prompt was edited), or a state's grammar is a function (it cannot be rewritten).
    """
    system = flow.system_message or ""
    if _TWO_LINES not in system:
        raise ValueError(f"without_thoughts: the system message has no {_TWO_LINES!r} line to rewrite")
    system = _THOUGHT_LINE.sub("", system.replace(_TWO_LINES, "Every reply is exactly one line:"))

    def one_line(out: Prompt | LLM | Tool) -> Prompt | LLM | Tool:
        if isinstance(out, Prompt):
            return Prompt(_THOUGHT_LINE.sub("", out.text))
        if isinstance(out, LLM) and out.grammar is not None:
            if not isinstance(out.grammar, str):
                raise ValueError(f"without_thoughts: grammar {out.grammar!r} is a function; give a text grammar")
            return dc_replace(out, grammar=_NO_THOUGHT_GRAMMAR.get(out.grammar, out.grammar))
        return out

    states = {n: s.with_outputs(*(one_line(o) for o in s.outputs)) for n, s in flow.states.items()}
    rules = [Transition(ANY if r.sources is ANY else [states[n] for n in r.sources], states[r.target], r.when)
             for r in flow.transitions]  # fmt: skip
    return _rebuilt(flow, states, rules, system_message=system)


def without_examples(flow: Flow) -> Flow:
    """Every state's instruction without its worked example (the prompts' "Example(s) of this
    step ... Now your step." block); the rules of each step stay.

    Why a switch: on small local models the example's Thought is copied into unrelated
    questions ("... so I filter on <column>" where nothing is to be filtered), so whether an
    example helps is measured, not assumed (docs/results.md, issue 15).
    """
    replaced = []
    for state in flow.states.values():
        outs = [Prompt(_WORKED_EXAMPLE.sub("", o.text)) if isinstance(o, Prompt) else o for o in state.outputs]
        if outs != list(state.outputs):
            replaced.append(state.with_outputs(*outs))
    return flow.variant(flow.name, replace=replaced)


def _schema_listing_init(flow: Flow, who: str) -> State:
    """The flow's initial state, which must list the schema (a ``describe_schema`` tool).

    Raises:
        ValueError: it does not; the message starts with ``who``.
    """
    init = flow.states[flow.initial]
    if not any(isinstance(o, Tool) and o.name.startswith("describe_schema") for o in init.outputs):
        raise ValueError(f"{who}: flow {flow.name!r} does not list its schema in {init.name}")
    return init


def with_similar_examples(flow: Flow, k: int = 3) -> Flow:
    """Init also shows ``k`` solved questions built like the episode's, from other databases, as
    one-line answers (:func:`~stateflow.tasks.sql.examples.similar_examples`); not the paper's flow.

    For flows that list their schema in Init and reply with one ``Action:`` line. Why: made-up
    worked answers hurt the best flow (:func:`with_solve_examples`); examples chosen per question,
    with real gold statements of other databases, are what text-to-SQL work found to help, so
    whether they help the 1.5B model is measured (docs/results.md, issue 15). Measured on the
    best flow they hurt too (61 % -> 54 % on the development sample, 7 won / 14 lost): the model
    copies the examples' clauses (an ``ORDER BY ... LIMIT 1``, a join), not only their shape
    (docs/results.md, "Worked answers retrieved per question").

    Raises:
        ValueError: the flow does not list its schema in Init.
    """
    from stateflow.tasks.sql.examples import similar_examples

    init = _schema_listing_init(flow, "with_similar_examples")
    return flow.variant(flow.name, replace=[init.with_outputs(*init.outputs, similar_examples(k))])


def with_question_last(flow: Flow) -> Flow:
    """Init repeats the question after the schema listing (:func:`~stateflow.tasks.kit.tools.restate_question`),
    so it is the last thing the model reads before it answers; not the paper's flow.

    Why: the question is the task prompt, sent first; with the schema listed in Init, about
    1,000 tokens of tables and values stand between it and the answer. Text-to-SQL prompts for
    code models usually put the question after the schema. Costs ~20 prompt tokens per call.
    Measured on the best flow (``sf_agent_vote_question_last``): 61 -> 66 % on the development
    sample, 55 -> 59 % held out, 39 -> 48 % on the 0.5B model (docs/results.md, "The question
    after the schema").

    Raises:
        ValueError: the flow does not list its schema in Init.
    """
    init = _schema_listing_init(flow, "with_question_last")
    return flow.variant(flow.name, replace=[init.with_outputs(*init.outputs, restate_question())])


def with_prefix_first(flow: Flow) -> Flow:
    """The question is said once, after the schema: the episode opens with a sentence shared by
    every task (:mod:`stateflow.tasks.kit.layout`), and Init's repeated question
    (:func:`with_question_last`) becomes the only one; not the paper's flow.

    Why: with the question as the first message, tasks on one database share only the system
    message, so the embedded server evaluates the schema listing (~500-1,000 tokens) again in
    every episode; laid out this way they share everything before the question, which the
    server's prompt cache then serves. It changes what the model reads (no question before the
    schema), so it is measured against the flow without it (``scripts/bench_throughput.py``).

    Raises:
        ValueError: Init does not repeat the question after the schema (``question_last``).
    """
    init = _schema_listing_init(flow, "with_prefix_first")
    at = next((i for i, o in enumerate(init.outputs) if isinstance(o, Tool) and o.name == "restate_question"), None)
    if at is None:
        raise ValueError(f"with_prefix_first: flow {flow.name!r} does not repeat the question in {init.name}")
    outs = list(init.outputs)
    outs[at] = state_question()
    return flow.variant(flow.name, replace=[init.with_outputs(*outs)])


def with_solve_examples(flow: Flow) -> Flow:
    """Solve's instruction starts with four worked one-line answers on a made-up database
    (``prompts/sql-levers/solve_examples.md``: a count with a filter, the most frequent value, a
    join whose columns follow the question, a ``NOT IN``); not the paper's flow. The file is kept
    out of ``prompts/sql``, whose hash identifies every recorded SQL run, so adding a lever's
    prompt does not orphan them; its text is part of this flow's fingerprint instead.

    For flows whose replies are one ``Action:`` line (:func:`without_thoughts`) and whose Solve
    has no worked example of its own (:func:`without_examples`). Why a switch: the paper's
    examples, one Thought/Action step each, hurt the small models (docs/results.md, issue 15);
    whether short question-to-statement pairs help the one-line answer is measured, not assumed.
    Measured on the best flow they hurt too (61.5 % -> 47.7 % on the first 65 development tasks,
    3 won / 12 lost): the model joins tables more often after them (docs/results.md, "A grammar
    bound to the schema, and worked answers").

    Raises:
        ValueError: the flow has no Solve prompt, or Solve already shows an example.
    """
    solve = flow.states.get("Solve")
    at = None if solve is None else next((i for i, o in enumerate(solve.outputs) if isinstance(o, Prompt)), None)
    if solve is None or at is None:
        raise ValueError(f"with_solve_examples: flow {flow.name!r} has no Solve prompt")
    text = solve.outputs[at].text
    if _WORKED_EXAMPLE.search(text):
        raise ValueError("with_solve_examples: Solve already shows a worked example (use examples=False)")
    outs = list(solve.outputs)
    outs[at] = Prompt(load_prompt("sql-levers", "solve_examples") + "\n\n" + text)
    return flow.variant(flow.name, replace=[solve.with_outputs(*outs)])


def with_guard(flow: Flow) -> Flow:
    """Every LLM call gets a :class:`~stateflow.repetition.RepeatGuard` (not the paper's flow): a
    reply repeating any statement already run (not only the last one) is re-asked, and a
    statement still repeated after the re-asks goes to a Submit state (the last result is
    submitted) instead of burning the remaining turns."""
    repeat_guard = RepeatGuard(parse=executed_statement)
    states, rules = _armed(flow, guard=repeat_guard)
    give_up = State("Submit", submit(), description="submit the last result (the model repeated itself)")
    states[give_up.name] = give_up
    acting = [s for n, s in states.items() if n in ("Solve", "Verify", "Error")]
    ends = sum(1 for r in rules if r.sources is ANY and r.target == "End")  # env_done, turn limit
    rules.insert(ends, Transition(acting, give_up, when=repeated_action(executed_statement)))
    return _rebuilt(flow, states, rules)


def with_cut(flow: Flow) -> Flow:
    """Every LLM call gets a :class:`~stateflow.degenerate.DegenerateCut` (not the paper's flow):
    digit/character runs such as ``LIMIT 100000000...`` are cut before they reach the database."""
    states, rules = _armed(flow, cut=DegenerateCut())
    return _rebuilt(flow, states, rules)


def _armed(flow: Flow, **fields: object) -> tuple[dict[str, State], list[Transition]]:
    """``flow``'s states with ``fields`` set on every LLM output, and its rules re-pointed at them."""

    def armed(state: State) -> State:
        return state.with_outputs(*[dc_replace(o, **fields) if isinstance(o, LLM) else o for o in state.outputs])

    states = {n: armed(s) if any(isinstance(o, LLM) for o in s.outputs) else s for n, s in flow.states.items()}
    rules = [Transition(ANY if r.sources is ANY else [states[n] for n in r.sources], states[r.target], r.when)
             for r in flow.transitions]  # fmt: skip
    return states, rules


def with_levers(flow: Flow, *, guard: bool = False, cut: bool = False) -> Flow:
    """:func:`with_guard` and/or :func:`with_cut` (the framework's anti-waste parts), in that order."""
    if guard:
        flow = with_guard(flow)
    return with_cut(flow) if cut else flow


_SCHEMA_GRAMMARS = {
    ACTION_GBNF: schema_action_grammar,
    ACTION_ONLY_GBNF: schema_action_only_grammar,
    THOUGHT_ACTION_GBNF: schema_thought_action_grammar,
}


def with_schema_grammar(flow: Flow) -> Flow:
    """Every reply's statement may name only the tables and columns Init listed (not the paper's
    flow; :mod:`stateflow.tasks.sql.grammar`).

    Each LLM output whose grammar is one of the free reply forms (:data:`ACTION_GBNF`,
    :data:`ACTION_ONLY_GBNF`, :data:`THOUGHT_ACTION_GBNF`) gets its schema-bound twin; other
    grammars (Observe's ``DESC <table>``) and outputs without a grammar are left alone. Why: on
    the development sample a third of the best flow's failures stopped at ``Unknown column``,
    several on names that exist nowhere in the database. Measured there, it changed nothing
    that matters (61 % -> 61 % on the vote, 55 % -> 56 % on ``sf_agent_hint``: most of those
    errors name a real column through the wrong table), so it is an option, not a default
    (docs/results.md, "A grammar bound to the schema").

    Raises:
        ValueError: the flow does not list its schema first (no ``describe_schema`` Init: the
            grammar would have no names), or no output has a grammar to bind (grammar off).
    """
    _schema_listing_init(flow, "with_schema_grammar")  # raises when Init lists no schema
    replaced = []
    for state in flow.states.values():
        outs = [
            dc_replace(o, grammar=_SCHEMA_GRAMMARS[o.grammar])
            if isinstance(o, LLM) and isinstance(o.grammar, str) and o.grammar in _SCHEMA_GRAMMARS
            else o
            for o in state.outputs
        ]
        if outs != list(state.outputs):
            replaced.append(state.with_outputs(*outs))
    if not replaced:
        raise ValueError(f"with_schema_grammar: no reply of flow {flow.name!r} has a grammar to bind (grammar=False?)")
    return flow.variant(flow.name, replace=replaced)


def submit_on_success(flow: Flow) -> Flow:
    """No Verify: the first SELECT that runs is submitted (a Submit state, no LLM call); a failed
    statement still goes to Error, which repairs it.

    Why: on small models Verify rarely improves a result (it mostly submits, sometimes replaces
    a right answer), while most wrong one-shot answers are statements that fail to run; this
    keeps the repair and drops the check.
    """
    give_up = flow.states.get("Submit") or State("Submit", submit(), description="submit the last result (no LLM call)")
    states = {**flow.states, give_up.name: give_up}
    return _rebuilt(flow, states, flow.transitions).variant(flow.name, drop=["Verify"], reroute={"Verify": "Submit"})


_EXECUTE_ONLY = {THOUGHT_ACTION_GBNF: EXECUTE_ONLY_GBNF, ACTION_GBNF: ACTION_ONLY_GBNF}
_NO_SUBMIT_IN_ERROR = "Do not submit now: a failed statement has no result to submit. Reply with the fixed statement."


def submits(ctx: Context, reply: str) -> bool:
    """The reply's action is ``submit``."""
    return parse_action(reply).kind == "submit"


@stable_id("stateflow.tasks.intercode_sql.submits_or_repeats_last_action")
def submits_or_repeats_last_action(ctx: Context, reply: str) -> bool:
    """:func:`submits` or :func:`~stateflow.tasks.kit.tools.repeats_last_action`."""
    return submits(ctx, reply) or repeats_last_action(ctx, reply)


def error_executes_only(flow: Flow) -> Flow:
    """Error answers with a statement, never ``submit`` (not the paper's flow).

    Error's grammar becomes the execute-only one (where grammars are on), its instruction says
    why, and a ``submit`` reply is resampled once at a higher temperature like a repeated
    statement is. Why a switch: the paper's Error may submit, but after a failed statement there
    is no result, so the submission scores 0; on the development sample ``sf_agent_hint``'s
    Error submitted in 17 of the 25 episodes that reached it (docs/results.md, issue 15).

    Raises:
        ValueError: the flow has no Error state, or its grammar is a function.
    """
    if "Error" not in flow.states:
        raise ValueError(f"error_executes_only: flow {flow.name!r} has no Error state")
    error = flow.states["Error"]

    def executes(out: Prompt | LLM | Tool) -> Prompt | LLM | Tool:
        if not isinstance(out, LLM):
            return out
        if out.grammar is not None and not isinstance(out.grammar, str):
            raise ValueError(f"error_executes_only: grammar {out.grammar!r} is a function; give a text grammar")
        grammar = None if out.grammar is None else _EXECUTE_ONLY.get(out.grammar, out.grammar)
        retry = submits_or_repeats_last_action if out.retry_when is repeats_last_action else submits
        if out.retry_when not in (None, repeats_last_action):
            raise ValueError(f"error_executes_only: Error already resamples on {out.retry_when!r}")
        return dc_replace(out, grammar=grammar, retry_when=retry)

    error = error.with_outputs(*(executes(o) for o in error.outputs)).with_instruction(_NO_SUBMIT_IN_ERROR)
    return flow.variant(flow.name, replace=[error])


def with_error_budget(flow: Flow, *, replies: int = 1) -> Flow:
    """Error answers at most ``replies`` times per episode; the next failed statement ends the
    episode (not the paper's flow).

    A rule ``failed & replies_in("Error", at_least=replies) -> End`` goes in just ahead of each
    rule into Error, so the budget is data in the flow's table like every other rule, and the
    runner then scores the episode as upstream does when nothing was submitted. Why: on the
    development sample, the 1.5B model running the paper's flow without examples reached Error in
    39 of 100 episodes and solved none of them; 33 looped there (Error -> Error, or Error ->
    Solve -> Error) until the turn limit, and Error took 58 % of the flow's prompt tokens
    (docs/results.md, issue 15).

    Raises:
        ValueError: ``replies`` is below 1, or the flow has no Error state, no End state, or no
            conditional rule into Error.
    """
    if replies < 1:
        raise ValueError(f"with_error_budget: replies must be >= 1, got {replies}")
    missing = [name for name in ("Error", "End") if name not in flow.states]
    if missing:
        raise ValueError(f"with_error_budget: flow {flow.name!r} has no {' or '.join(missing)} state")
    spent = replies_in("Error", at_least=replies)
    rules: list[Transition] = []
    for rule in flow.transitions:
        if rule.target == "Error" and rule.when is not None:
            sources = ANY if rule.sources is ANY else [flow.states[s] for s in rule.sources]  # type: ignore[union-attr]
            rules.append(Transition(sources, flow.states["End"], when=rule.when & spent))
        rules.append(rule)
    if len(rules) == len(flow.transitions):
        raise ValueError(f"with_error_budget: flow {flow.name!r} has no conditional rule into Error")
    return flow.variant(flow.name, transitions=rules)
