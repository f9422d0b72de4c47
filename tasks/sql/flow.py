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
The levers that are not the paper's are in :mod:`stateflow.tasks.sql.transforms` and
:mod:`stateflow.tasks.sql.votes`; :mod:`stateflow.tasks.sql.levers` lists them all as data.
"""

from __future__ import annotations

from collections.abc import Hashable

from stateflow.tasks.kit.actions import parse_action
from stateflow.tasks.kit.grammar import (
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
    statement_is,
    turns_exhausted,
)
from stateflow.tasks.sql.hints import unknown_column_hint
from stateflow.tasks.sql.rebind import rebind_columns

from stateflow import ANY, LLM, Flow, Prompt, State, Transition
from stateflow.stable_id import stable_id

__all__ = [
    "SQL_FLOW",
    "SQL_NO_ERROR",
    "SQL_NO_OBSERVE",
    "SQL_NO_VERIFY",
    "SQL_SCHEMA",
    "executed_statement",
    "sql_flow",
    "with_schema",
    "without_error",
    "without_observe",
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


SQL_FLOW = sql_flow()
SQL_NO_VERIFY = without_verify(SQL_FLOW)
SQL_NO_ERROR = without_error(SQL_FLOW)
SQL_NO_OBSERVE = without_observe(SQL_FLOW)
SQL_SCHEMA = with_schema(SQL_FLOW)
