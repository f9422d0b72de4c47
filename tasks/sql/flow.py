"""The paper's InterCode-SQL flow (Init, Observe, Solve, Verify, Error, End) and its ablations.

:func:`sql_flow` is the flow of the paper's figure, defined once; the ablations and the schema
variant are derived from it with :meth:`~stateflow.flow.Flow.variant`, never copied::

    Init ──► Observe ──► Solve ◄──► Verify          any state ── error ──► Error
                           ▲           │             any state ── submit ─► End
                           └── DESC ───┘

Rules, in priority order (the first that holds wins):

1. any state: the agent submitted → End
2. any state: the environment turn limit (``vars["max_turns"]``) is used up → End
3. any state: the action failed or was malformed → Error (so Error → Error on repeated failures)
4. Init → Observe (Init runs ``SHOW TABLES`` with no LLM call)
5. Observe → Solve
6. Solve / Verify / Error: a successful SELECT → Verify
7. Solve / Verify / Error: a successful DESC → Solve
8. Solve / Verify / Error: anything else → Solve

Variants: :func:`without_verify` (Solve is told to submit when done), :func:`without_error`
(failures go to Verify, which is told to fix them), :func:`without_observe` (Init goes straight
to Solve, which is told to DESC first) and :func:`with_schema` (not the paper's flow: Init lists
every table with its columns and Observe is skipped; small local models gain most from it).
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from dataclasses import dataclass
from dataclasses import replace as dc_replace

from stateflow.tasks.kit.actions import parse_action
from stateflow.tasks.kit.grammar import (
    ACTION_GBNF,
    ACTION_ONLY_GBNF,
    EXECUTE_ONLY_GBNF,
    THOUGHT_ACTION_GBNF,
    describe_table_grammar,
)
from stateflow.tasks.kit.prompts import load_prompt
from stateflow.tasks.kit.tools import (
    ObservationFormat,
    action_failed,
    describe_schema,
    env_done,
    execute,
    repeats_last_action,
    restate_question,
    statement_is,
    strip_values,
    submit,
    turns_exhausted,
)
from stateflow.tasks.sql.grammar import (
    schema_action_grammar,
    schema_action_only_grammar,
    schema_thought_action_grammar,
)
from stateflow.tasks.sql.hints import unknown_column_hint
from stateflow.tasks.sql.rebind import RebindingExecutor, rebind_columns

from stateflow import ANY, LLM, Context, Flow, Prompt, State, Tool, Transition, replies_in
from stateflow.degenerate import DegenerateCut
from stateflow.repetition import RepeatGuard, repeated_action
from stateflow.stable_id import stable_id
from stateflow.vote import Variant, Vote

__all__ = [
    "SQL_FLOW",
    "SQL_NO_ERROR",
    "SQL_NO_OBSERVE",
    "SQL_NO_VERIFY",
    "SQL_SCHEMA",
    "build_sql_flow",
    "error_executes_only",
    "sql_flow",
    "submit_on_success",
    "with_answer_vote",
    "with_levers",
    "with_question_last",
    "with_schema",
    "with_schema_grammar",
    "with_similar_examples",
    "with_solve_examples",
    "with_vote",
    "without_error",
    "without_examples",
    "without_observe",
    "without_thoughts",
    "without_verify",
]


def sql_flow(
    *,
    grammar: bool = False,
    resample_repeats: bool = True,
    fmt: ObservationFormat | None = None,
    rebind: bool = False,
    hint: bool = False,
) -> Flow:
    """The paper's SQL flow (rules in the module docstring).

    Args:
        grammar: constrain every LLM call with the Thought/Action grammar (enforced by servers
            that support grammars, monitor-only elsewhere); Observe's grammar admits only
            ``execute[DESC <table>]`` for a table that ``SHOW TABLES`` listed.
        resample_repeats: when a reply repeats the previous command verbatim, ask once more at a
            higher temperature (small models loop at temperature 0; the discarded reply is still
            traced and paid for).
        fmt: how observations are shown to the agent.
        rebind: columns read through the wrong table alias are re-bound before a SELECT runs
            (:func:`~stateflow.tasks.kit.tools.execute`; needs the schema set-up of :func:`with_schema`
            to know the columns, otherwise nothing changes). Not the paper's flow.
        hint: an "Unknown column" error says which tables have the column
            (:func:`~stateflow.tasks.kit.tools.execute`; also needs the schema set-up). Not the paper's flow.
    """
    retry = repeats_last_action if resample_repeats else None
    llm = LLM(grammar=THOUGHT_ACTION_GBNF if grammar else None, retry_when=retry)
    look = LLM(grammar=describe_table_grammar if grammar else None, retry_when=retry)  # DESC a listed table
    act = execute(fmt=fmt, rebind=rebind_columns if rebind else None, hint=unknown_column_hint if hint else None)
    init = State(
        "Init", execute("SHOW TABLES", fmt=fmt, name="show_tables"), description="list the tables (no LLM call)"
    )
    observe = State("Observe", _prompt("observe"), look, act, description="DESC the relevant table")
    solve = State("Solve", _prompt("solve"), llm, act, description="write the SELECT")
    verify = State("Verify", _prompt("verify"), llm, act, description="check the result; revise or submit")
    error = State("Error", _prompt("error"), llm, act, description="recover from a failed statement")
    end = State("End", final=True)
    return Flow(
        "intercode-sql",
        initial=init,
        transitions=[  # checked top to bottom; the first rule that holds wins
            Transition(ANY, end, when=env_done),
            Transition(ANY, end, when=turns_exhausted()),
            Transition(ANY, error, when=action_failed),  # includes Error -> Error
            Transition(init, observe),
            Transition(observe, solve),
            Transition([solve, verify, error], verify, when=statement_is("SELECT")),
            Transition([solve, verify, error], solve, when=statement_is("DESC")),
            Transition([solve, verify, error], solve),
        ],
        max_transitions=40,
        system_message=load_prompt("sql", "system"),
        description="StateFlow for InterCode-SQL (Wu et al. 2024)",
    )


@stable_id("stateflow.tasks.intercode_sql.executed_statement")
def executed_statement(reply: str) -> Hashable | None:
    """The statement a reply would run (``None`` for ``submit`` or a reply without an action)."""
    action = parse_action(reply)
    return " ".join(action.command.split()) if action.kind == "execute" else None


def _prompt(key: str) -> Prompt:
    return Prompt(load_prompt("sql", key))


_SUBMIT_IN_SOLVE = "When the last result already answers the question exactly, submit instead."
_DESC_IN_SOLVE = "Start by running DESC on the tables you need; you have not seen any columns yet."
_COLUMN_ORDER = (
    "- Put the columns in the order the question names them (the answer is compared row by row, as whole tuples)."
)
_ERRORS_IN_VERIFY = "If the last statement failed, read the error and fix it (DESC a table to see its real columns)."


def without_verify(flow: Flow) -> Flow:
    """No_Verify: a SELECT goes back to Solve, which is told to submit when the result answers."""
    solve = flow.states["Solve"].with_instruction(_SUBMIT_IN_SOLVE)
    return flow.variant(flow.name + "-no-verify", drop=["Verify"], replace=[solve])


def without_error(flow: Flow) -> Flow:
    """No_Error: a failed action goes to Verify, which is told to read the error and fix it."""
    verify = flow.states["Verify"].with_instruction(_ERRORS_IN_VERIFY)
    return flow.variant(flow.name + "-no-error", drop=["Error"], reroute={"Error": "Verify"}, replace=[verify])


def without_observe(flow: Flow) -> Flow:
    """No_Observe: Init goes straight to Solve, which is told to DESC the tables it needs first."""
    solve = flow.states["Solve"].with_instruction(_DESC_IN_SOLVE)
    return flow.variant(flow.name + "-no-observe", drop=["Observe"], reroute={"Observe": "Solve"}, replace=[solve])


def with_schema(flow: Flow, *, values: int = 0) -> Flow:
    """The schema variant: Init lists every table with its columns (no LLM call), Observe is skipped.

    ``values``: also show that many frequent values of each text column
    (:func:`~stateflow.tasks.kit.tools.describe_schema`; not the paper's flow).
    """
    init = State("Init", describe_schema(values=values), description="list every table and its columns (no LLM call)")
    name = flow.name.replace("intercode-sql", "intercode-sql-schema", 1)
    return flow.variant(name, drop=["Observe"], reroute={"Observe": "Solve"}, replace=[init])


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


def with_levers(flow: Flow, *, guard: bool = False, cut: bool = False) -> Flow:
    """The flow with the framework's anti-waste parts on every LLM call (not the paper's flow).

    Args:
        guard: a :class:`~stateflow.repetition.RepeatGuard` re-asks the model when a reply
            repeats any statement already run (not only the last one), and a statement still
            repeated after the re-asks goes to a Submit state (the last result is submitted)
            instead of burning the remaining turns.
        cut: a :class:`~stateflow.degenerate.DegenerateCut` cuts digit/character runs such as
            ``LIMIT 100000000...`` before they reach the database.
    """
    if not (guard or cut):
        return flow
    repeat_guard = RepeatGuard(parse=executed_statement) if guard else None
    cutter = DegenerateCut() if cut else None

    def armed(state: State) -> State:
        outs = [dc_replace(o, guard=repeat_guard, cut=cutter) if isinstance(o, LLM) else o for o in state.outputs]
        return state.with_outputs(*outs)

    states = {n: armed(s) if any(isinstance(o, LLM) for o in s.outputs) else s for n, s in flow.states.items()}
    rules = [Transition(ANY if r.sources is ANY else [states[n] for n in r.sources], states[r.target], r.when)
             for r in flow.transitions]  # fmt: skip
    if guard:
        give_up = State("Submit", submit(), description="submit the last result (the model repeated itself)")
        states[give_up.name] = give_up
        acting = [s for n, s in states.items() if n in ("Solve", "Verify", "Error")]
        ends = sum(1 for r in rules if r.sources is ANY and r.target == "End")  # env_done, turn limit
        rules.insert(ends, Transition(acting, give_up, when=repeated_action(executed_statement)))
    return _rebuilt(flow, states, rules)


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


def with_vote(flow: Flow, *, k: int = 5, state: str = "Solve", rebind: bool = False) -> Flow:
    """``state`` answers by execution-guided self-consistency: :class:`~stateflow.vote.Vote` samples
    ``k`` statements, runs each read-only on the task's database
    (:class:`~stateflow.envs.sql.readonly.EpisodeReader`) and keeps the one whose result most
    candidates share. Each candidate is traced with its usage. With ``rebind``, candidates are
    re-bound before they run (:class:`~stateflow.tasks.sql.rebind.RebindingExecutor`), as the
    flow's own ``execute(rebind=True)`` will run the winner.
    """
    from stateflow.envs.sql.readonly import EpisodeReader  # here: defining other flows needs no MySQL driver

    target = flow.states[state]
    reader = EpisodeReader()
    vote = Vote(parse=executed_statement, executor=RebindingExecutor(reader) if rebind else reader, k=k)
    outs = [dc_replace(o, vote=vote) if isinstance(o, LLM) else o for o in target.outputs]
    return flow.variant(flow.name, replace=[target.with_outputs(*outs)])


@dataclass(frozen=True)
@stable_id("stateflow.tasks.intercode_sql._WithThought")
class _WithThought:
    """A vote variant's rewrite: the one-line reply format back to Thought + Action, and the
    schema without its example values unless ``keep_values``."""

    one_line_system: str
    two_line_system: str
    keep_values: bool = False

    def __call__(self, text: str) -> str:
        text = text.replace(self.one_line_system, self.two_line_system)
        return text if self.keep_values else strip_values(text)


def with_answer_vote(flow: Flow, *, state: str = "Solve", rebind: bool = False, wide: bool = False) -> Flow:
    """``state`` answers by a vote among three differently prompted greedy answers (not the
    paper's flow): its own request; its own without the example values; and the same with a
    Thought line before the action (the system message's two-line format) and the schema
    without values. Each statement runs read-only (re-bound when the flow re-binds) and the
    result most of them share is the answer; a tie keeps the state's own. When the first two
    agree, the third is not asked (``Vote.stop_when_decided``): it is the costly one (another
    system message, so no cached prompt prefix, and a Thought to write) and could not change
    the answer.

    It needs a flow whose replies have no Thought line and whose schema shows values
    (``build_sql_flow(schema=True, thoughts=False, values=n)``): the variants switch those two
    levers back off (without values the third answer is the first one again). With ``rebind``,
    candidates are re-bound before they run, as the flow's own ``execute(rebind=True)`` will
    run the winner. Why: on the development sample, the methods with and without each lever
    solved different tasks (docs/results.md, issue 15), and a vote over differently prompted
    answers can keep what each gets right, which k samples of one prompt (``with_vote``) did not.

    With ``wide``, two more variants follow: the Thought format with the values kept, and the
    state's own request sampled (temperature 0.7); candidates are asked in order until two
    share a result (``Vote.quorum=2``), at most five. Why: on the development sample the
    three-way vote lost most tasks where its answers all differed or all failed, and the
    methods around it solved some of those (docs/results.md, issue 15); a quorum keeps the
    cost of the usual case (the first two agree) unchanged.

    Raises:
        ValueError: the flow has no such state, or it still asks for Thought lines.
    """
    if state not in flow.states:
        raise ValueError(f"with_answer_vote: flow {flow.name!r} has no state {state!r}")
    system = flow.system_message or ""
    if _TWO_LINES in system:
        raise ValueError("with_answer_vote: the flow's replies already have Thought lines (use thoughts=False)")
    from stateflow.envs.sql.readonly import EpisodeReader  # here: defining other flows needs no MySQL driver

    target = flow.states[state]
    two_lines = load_prompt("sql", "system")  # the system message before without_thoughts rewrote it
    reader = EpisodeReader()

    def voting(out: Prompt | LLM | Tool) -> Prompt | LLM | Tool:
        if not isinstance(out, LLM):
            return out
        thought_grammar = (
            None
            if out.grammar is None
            else schema_thought_action_grammar
            if out.grammar in (schema_action_grammar, schema_action_only_grammar)
            else THOUGHT_ACTION_GBNF
        )
        variants = (
            Variant("own"),
            Variant("no values", rewrite=strip_values),
            Variant("with thought, no values", rewrite=_WithThought(system, two_lines), grammar=thought_grammar),
        )
        if wide:
            variants += (
                Variant(
                    "with thought", rewrite=_WithThought(system, two_lines, keep_values=True), grammar=thought_grammar
                ),
                Variant("own, sampled", sampled=True),
            )
        executor = RebindingExecutor(reader) if rebind else reader
        vote = Vote(
            parse=executed_statement,
            executor=executor,
            variants=variants,
            stop_when_decided=not wide,
            quorum=2 if wide else None,
        )
        return dc_replace(out, vote=vote)

    return flow.variant(flow.name, replace=[target.with_outputs(*(voting(o) for o in target.outputs))])


def build_sql_flow(
    *,
    observe: bool = True,
    verify: bool = True,
    error: bool = True,
    grammar: bool = False,
    resample_repeats: bool = True,
    schema: bool = False,
    guard: bool = False,
    cut: bool = False,
    column_order: bool = False,
    examples: bool = True,
    verify_then_submit: bool = True,
    vote: int = 0,
    rebind: bool = False,
    hint: bool = False,
    thoughts: bool = True,
    error_submits: bool = True,
    values: int = 0,
    answer_vote: bool = False,
    wide_vote: bool = False,
    error_vote: bool = False,
    error_replies: int = 0,
    schema_grammar: bool = False,
    solve_examples: bool = False,
    similar_examples: int = 0,
    fewest_tables: bool = False,
    question_last: bool = False,
    fmt: ObservationFormat | None = None,
    name: str | None = None,
) -> Flow:
    """The SQL flow with ablations chosen by switches (the variants of :func:`sql_flow` combined).

    Args:
        observe: include Observe (off: :func:`without_observe`).
        verify: include Verify (off: :func:`without_verify`).
        error: include Error (off: :func:`without_error`).
        grammar, resample_repeats, fmt: as in :func:`sql_flow`.
        guard, cut: as in :func:`with_levers`.
        schema: the schema variant (:func:`with_schema`; Observe is then skipped anyway).
        column_order: Solve is told to put the columns in the order the question names them
            (InterCode compares rows as whole tuples, so ``(city, count)`` scores 0 against a
            gold ``(count, city)``).
        examples: keep each state's worked example (off: :func:`without_examples`).
        verify_then_submit: off: the first SELECT that runs is submitted (:func:`submit_on_success`).
        vote: ``k > 0``: Solve votes over ``k`` sampled statements (:func:`with_vote`).
        rebind, hint: as in :func:`sql_flow` (take effect with ``schema``).
        thoughts: off: every reply is ``Action: ...`` alone (:func:`without_thoughts`; needs
            ``schema``, since Observe's grammar is a function of the listed tables).
        error_submits: off: Error answers with a statement, never ``submit`` (:func:`error_executes_only`).
        values: with ``schema``, Init also shows that many frequent values of each text column.
        answer_vote: Solve's answer is voted among three differently prompted answers
            (:func:`with_answer_vote`; needs ``schema``, ``values`` and ``thoughts=False``).
        wide_vote: with ``answer_vote``, up to five variants are asked until two answers agree
            (``with_answer_vote(wide=True)``).
        error_vote: with ``answer_vote``, Error's repair is voted the same way as Solve's answer
            (``with_answer_vote(state="Error")``). Why: on the development sample, 11 of the 39
            tasks the three-way vote lost had every Solve candidate fail to run, and Error's
            single greedy repair then failed too (docs/results.md, issue 15).
        error_replies: ``n > 0``: Error answers at most ``n`` times, then a failed statement
            ends the episode (:func:`with_error_budget`).
        schema_grammar: replies may name only the listed tables and columns
            (:func:`with_schema_grammar`; needs ``schema``, takes effect with ``grammar``: a
            server that takes no grammar gets the flow without it, as with the other grammars).
        solve_examples: Solve starts with four worked one-line answers (:func:`with_solve_examples`;
            needs ``examples=False`` and ``thoughts=False``).
        similar_examples: ``k > 0``: Init also shows ``k`` solved questions like the episode's,
            from other databases (:func:`with_similar_examples`; needs ``schema`` and
            ``thoughts=False``).
        fewest_tables: Solve is told to join a table only when the others lack a column it needs
            (``prompts/sql-levers/fewest_tables.md``). Why: of the best flow's 28 wrong results
            that ran on the development sample, 9 join a table the question does not need
            (docs/results.md, "Two more votes"); a worked example and a Thought line both made
            the model join more, so whether a plain rule makes it join less is measured.
        question_last: Init repeats the question after the schema listing
            (:func:`with_question_last`; needs ``schema``).
        name: the flow's name (by default ``intercode-sql[-schema]`` plus ``-no-<state>`` for
            each state switched off, in the order observe, verify, error).

    Raises:
        ValueError: both Verify and Error are switched off (nothing would handle a failed statement).
    """
    if not (verify or error):
        raise ValueError("the SQL flow needs Verify or Error to handle failed statements")
    flow = with_levers(
        sql_flow(grammar=grammar, resample_repeats=resample_repeats, fmt=fmt, rebind=rebind, hint=hint),
        guard=guard,
        cut=cut,
    )
    base = flow.name + ("-schema" if schema else "")
    if values and not schema:
        raise ValueError("values needs schema=True (the values are part of the schema listing)")
    if schema:
        flow = with_schema(flow, values=values)
    # the fewest-tables rule is kept out of prompts/sql, whose hash identifies every recorded SQL run
    solve_rules = [_COLUMN_ORDER] * column_order + [load_prompt("sql-levers", "fewest_tables").strip()] * fewest_tables
    if solve_rules:
        flow = flow.variant(flow.name, replace=[flow.states["Solve"].with_instruction(*solve_rules)])
    if not examples:
        flow = without_examples(flow)
    if not verify_then_submit:
        flow = submit_on_success(flow)
    if not thoughts:
        if not schema:
            raise ValueError("thoughts=False needs schema=True (Observe's grammar cannot be rewritten)")
        flow = without_thoughts(flow)
    if not error_submits and error:
        flow = error_executes_only(flow)
    if solve_examples:
        if examples or thoughts:
            raise ValueError(
                "solve_examples needs examples=False and thoughts=False (its examples are one-line answers)"
            )
        flow = with_solve_examples(flow)
    if similar_examples:
        if not schema or thoughts:
            raise ValueError(
                "similar_examples needs schema=True and thoughts=False (its examples are one-line answers)"
            )
        flow = with_similar_examples(flow, k=similar_examples)
    if question_last:
        if not schema:
            raise ValueError("question_last needs schema=True (it repeats the question after the schema listing)")
        flow = with_question_last(flow)
    if schema_grammar and not schema:
        raise ValueError("schema_grammar needs schema=True (the grammar's names are the listing's)")
    if schema_grammar and grammar:
        flow = with_schema_grammar(flow)
    if vote:
        flow = with_vote(flow, k=vote, rebind=rebind)
    if answer_vote:
        if not (values and not thoughts):
            raise ValueError("answer_vote needs values > 0 and thoughts=False (its variants switch both back off)")
        flow = with_answer_vote(flow, rebind=rebind, wide=wide_vote)
        if error_vote:
            if not error:
                raise ValueError("error_vote needs error=True (it votes Error's repair)")
            flow = with_answer_vote(flow, state="Error", rebind=rebind, wide=wide_vote)
    elif wide_vote or error_vote:
        raise ValueError("wide_vote and error_vote need answer_vote=True (they extend that vote)")
    if error_replies:
        if not error:
            raise ValueError("error_replies needs error=True (the budget is Error's)")
        flow = with_error_budget(flow, replies=error_replies)
    # Applied in this order so added instructions read in the order the original builder wrote them.
    for off, derive in (
        (not verify, without_verify),
        (not error, without_error),
        (not observe and not schema, without_observe),
    ):
        if off:
            flow = derive(flow)
    ablated = [a for a, on in (("observe", observe or schema), ("verify", verify), ("error", error)) if not on]
    wanted = name or base + "".join(f"-no-{a}" for a in ablated)
    return flow if flow.name == wanted else flow.variant(wanted)


SQL_FLOW = sql_flow()
SQL_NO_VERIFY = without_verify(SQL_FLOW)
SQL_NO_ERROR = without_error(SQL_FLOW)
SQL_NO_OBSERVE = without_observe(SQL_FLOW)
SQL_SCHEMA = with_schema(SQL_FLOW)
