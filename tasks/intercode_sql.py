"""The paper's InterCode-SQL flow (Init, Observe, Solve, Verify, Error, End) and its ablations.

One definition, built by :func:`build_sql_flow`; the ablations are the same definition with a
state switched off, never copies::

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
"""

from __future__ import annotations

from stateflow.tasks.grammar import THOUGHT_ACTION_GBNF, describe_table_grammar
from stateflow.tasks.prompts import load_prompt
from stateflow.tasks.tools import (
    ObservationFormat,
    action_failed,
    describe_schema,
    env_done,
    execute,
    repeats_last_action,
    statement_is,
    turns_exhausted,
)

from stateflow import ANY, LLM, Flow, Prompt, State, Transition

__all__ = ["SQL_FLOW", "SQL_NO_ERROR", "SQL_NO_OBSERVE", "SQL_NO_VERIFY", "SQL_SCHEMA", "build_sql_flow"]

_SUBMIT_IN_SOLVE = "When the last result already answers the question exactly, submit instead."
_DESC_IN_SOLVE = "Start by running DESC on the tables you need; you have not seen any columns yet."
_ERRORS_IN_VERIFY = "If the last statement failed, read the error and fix it (DESC a table to see its real columns)."


def build_sql_flow(
    *,
    observe: bool = True,
    verify: bool = True,
    error: bool = True,
    grammar: bool = False,
    resample_repeats: bool = True,
    schema: bool = False,
    fmt: ObservationFormat | None = None,
    name: str | None = None,
) -> Flow:
    """Build the SQL flow.

    Args:
        observe: include Observe (No_Observe: Init goes straight to Solve, which may DESC).
        verify: include Verify (No_Verify: Solve is told to submit when done).
        error: include Error (No_Error: failures go to Verify, which is told to fix them).
        grammar: constrain every LLM call with the Thought/Action grammar (servers that
            support grammars enforce it; elsewhere a warning says it is monitor-only).
            Observe's grammar admits only ``execute[DESC <table>]`` for a table that
            ``SHOW TABLES`` listed: it exists to inspect one real table.
        schema: a variant, not the paper's flow: Init lists every table with its columns (no
            LLM call) and Observe is skipped, so Solve starts with the whole schema in view.
            Small local models gain most from it (docs/platform.md).
        resample_repeats: when a reply repeats the previous command verbatim, ask once more at
            a higher temperature (small models loop at temperature 0; the discarded reply is
            still traced and paid for).
        fmt: how observations are shown to the agent.
        name: the flow's name (derived from the switches by default).
    """
    if not (verify or error):
        raise ValueError("the SQL flow needs Verify or Error to handle failed statements")
    if schema:
        observe = False
    retry = repeats_last_action if resample_repeats else None
    llm = LLM(grammar=THOUGHT_ACTION_GBNF if grammar else None, retry_when=retry)
    act = execute(fmt=fmt)

    def instruction(key: str, *extra: str) -> Prompt:
        return Prompt("\n".join([load_prompt("sql", key), *extra]))

    if schema:
        init = State("Init", describe_schema(), description="list every table and its columns (no LLM call)")
    else:
        init = State(
            "Init", execute("SHOW TABLES", fmt=fmt, name="show_tables"), description="list the tables (no LLM call)"
        )
    # Observe only inspects: its grammar (when on) names a listed table and has no submit.
    observe_llm = LLM(grammar=describe_table_grammar if grammar else None, retry_when=retry)
    observe_s = State("Observe", instruction("observe"), observe_llm, act, description="DESC the relevant table")
    solve = State(
        "Solve",
        instruction("solve", *([] if verify else [_SUBMIT_IN_SOLVE]), *([] if observe or schema else [_DESC_IN_SOLVE])),
        llm,
        act,
        description="write the SELECT",
    )
    verify_s = State(
        "Verify",
        instruction("verify", *([] if error else [_ERRORS_IN_VERIFY])),
        llm,
        act,
        description="check the result; revise or submit",
    )
    error_s = State("Error", instruction("error"), llm, act, description="recover from a failed statement")
    end = State("End", final=True)

    loop = [solve, *([verify_s] if verify else []), *([error_s] if error else [])]
    rules = [
        Transition(ANY, end, when=env_done),
        Transition(ANY, end, when=turns_exhausted()),
        Transition(ANY, error_s if error else verify_s, when=action_failed),
        Transition(init, observe_s if observe else solve),
    ]
    if observe:
        rules.append(Transition(observe_s, solve))
    if verify:
        rules.append(Transition(loop, verify_s, when=statement_is("SELECT")))
    rules.append(Transition(loop, solve, when=statement_is("DESC")))
    rules.append(Transition(loop, solve))
    switches = (
        (("verify", verify), ("error", error))
        if schema
        else (("observe", observe), ("verify", verify), ("error", error))
    )
    ablated = [n for n, on in switches if not on]
    return Flow(
        name or "intercode-sql" + ("-schema" if schema else "") + "".join(f"-no-{a}" for a in ablated),
        initial=init,
        states=[
            init,
            *([observe_s] if observe else []),
            solve,
            *([verify_s] if verify else []),
            *([error_s] if error else []),
            end,
        ],
        transitions=rules,
        max_transitions=40,
        system_message=load_prompt("sql", "system"),
        description="StateFlow for InterCode-SQL (Wu et al. 2024)",
    )


SQL_FLOW = build_sql_flow()
SQL_NO_VERIFY = build_sql_flow(verify=False)
SQL_NO_ERROR = build_sql_flow(error=False)
SQL_NO_OBSERVE = build_sql_flow(observe=False)
SQL_SCHEMA = build_sql_flow(schema=True)
