"""Answer, then repair: the one-shot answer with a repair loop on failed statements (not the paper's flow).

::

    Setup ──► Answer ── runs ──► Submit ──► End
                 │                  ▲
                 └─ fails ─► Repair ┤ (a SELECT that runs, a repeated statement, or the repairs are used up)
                              ▲  │
                              └──┘ fails again, or looks at a table (DESC)

Why this shape: on the development sample (docs/results.md, issue 15) the 1.5B model's best single
answer came from the one-shot prompt with no Thought line, and half of its failures were
statements that did not run. Answer is exactly that one-shot call (the same messages, so the
same first answers); the flow can only add to it, by repairing what fails. A statement that runs
is submitted as is: asking a small model to judge its own result (the paper's Verify) replaced
right answers about as often as it fixed wrong ones.
"""

from __future__ import annotations

from stateflow.tasks.agents.baselines import build_oneshot
from stateflow.tasks.kit.blackboard import EpisodeVars
from stateflow.tasks.kit.grammar import ACTION_ONLY_GBNF, EXECUTE_ONLY_GBNF
from stateflow.tasks.kit.tools import ObservationFormat, action_failed, describe_schema, env_done, execute, statement_is
from stateflow.tasks.sql.flow import executed_statement
from stateflow.tasks.sql.hints import unknown_column_hint
from stateflow.tasks.sql.rebind import rebind_columns

from stateflow import ANY, LLM, Condition, Context, Flow, Prompt, State, Tool, Transition, predicate
from stateflow.degenerate import DegenerateCut
from stateflow.repetition import RepeatGuard, repeated_action

__all__ = ["REPAIR_INSTRUCTION", "build_answer_repair"]

REPAIR_INSTRUCTION = """Your statement failed; the error is above. Write the corrected SELECT for YOUR question.
- Unknown column: take the column from a table that has it (a note under the error names them) and read that table.
- Unknown table: use a table name exactly as listed.
- Invalid use of group function: put conditions on COUNT, SUM, AVG... in HAVING after GROUP BY.
- Syntax error: rewrite the statement in plain MySQL.
Do not repeat a statement that already failed."""
"""The Repair state's instruction (after the error and, with ``hint``, where the column is)."""


def repairs_used(attempts: int) -> Condition:
    """The episode has already run ``attempts`` repairs (Answer and the set-up are not repairs)."""

    def used(ctx: Context) -> bool:
        return EpisodeVars.of(ctx).turns >= 2 + attempts  # set-up + Answer + the repairs

    return predicate(used, f"{attempts} repairs used")


def build_answer_repair(
    *,
    fmt: ObservationFormat | None = None,
    grammar: bool = False,
    thought: bool = False,
    attempts: int = 3,
    hint: bool = True,
) -> Flow:
    """The one-shot SQL answer (schema shown, columns re-bound) with up to ``attempts`` repairs.

    Args:
        fmt: how observations are shown.
        grammar: constrain every reply (Answer: the one-shot grammar; Repair: execute only).
        thought: replies start with a Thought line (off: ``Action: execute[...]`` alone).
        attempts: the most repair calls; then the last result is submitted, whatever it is.
        hint: an "Unknown column" error says which tables have the column.

    Raises:
        ValueError: ``attempts`` < 1.
    """
    if attempts < 1:
        raise ValueError(f"build_answer_repair: attempts must be >= 1, got {attempts}")
    fmt = fmt or ObservationFormat()
    oneshot = build_oneshot(
        "sql", fmt=fmt, setup=describe_schema(), grammar=grammar, rebind=rebind_columns, thought=thought
    )
    act = execute(fmt=fmt, rebind=rebind_columns, hint=unknown_column_hint if hint else None)
    setup, answer = oneshot.states["Setup"], oneshot.states["Answer"]
    answer = answer.with_outputs(*[act if isinstance(o, Tool) else o for o in answer.outputs])
    repair_grammar = (EXECUTE_ONLY_GBNF if thought else ACTION_ONLY_GBNF) if grammar else None
    repair = State(
        "Repair",
        Prompt(REPAIR_INSTRUCTION),
        LLM(grammar=repair_grammar, guard=RepeatGuard(parse=executed_statement), cut=DegenerateCut()),
        act,
        description="fix the failed statement",
    )
    submit_state = oneshot.states["Submit"]
    end = State("End", final=True)
    return Flow(
        "sql-answer-repair",
        initial=setup,
        states=[setup, answer, repair, submit_state, end],
        transitions=[
            Transition(ANY, end, when=env_done),
            Transition(setup, answer),
            # a statement the guard could not talk the model out of would only fail again
            Transition(repair, submit_state, when=repeated_action(executed_statement)),
            Transition([answer, repair], repair, when=action_failed & ~repairs_used(attempts)),
            Transition(repair, repair, when=statement_is("DESC") & ~repairs_used(attempts)),
            Transition([answer, repair], submit_state),
        ],
        max_transitions=2 * attempts + 6,
        system_message=oneshot.system_message,
        description="one-shot answer, repaired when it fails to run",
    )
