"""The SQL flow's levers, as data: one :class:`~stateflow.tasks.kit.levers.Lever` record each.

:data:`SQL_LEVERS` lists every switch of the paper's SQL flow (:func:`~stateflow.tasks.sql.flow.sql_flow`)
in the order their transforms run, with what each needs, what it conflicts with and where its
measured effect is written up (a section of ``docs/results.md`` or of its appendix
``docs/results-history.md``). A method is a recipe over this
table (:func:`sql_recipe_flow`); the presets of :mod:`stateflow.tasks.sql.benchmark` are named
recipes. Adding a lever is one record here plus its transform (in this file or in
:mod:`stateflow.tasks.sql.transforms`).

Why the order below: it is the order the original builder applied its switches in, and the
flow's fingerprint (which identifies recorded runs) depends on it where two levers rewrite the
same state; ``tests/tasks/test_golden_identities.py`` checks every preset against the archive.

Example:
    >>> flow = sql_recipe_flow({"schema", "values", "no_thoughts", "no_examples", "question_last"})
    >>> flow.name, list(flow.states)[:2]
    ('intercode-sql-schema', ['Init', 'Solve'])
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from stateflow.tasks.kit.levers import Lever, LeverContext, LeverTable
from stateflow.tasks.kit.prompts import load_prompt
from stateflow.tasks.kit.tools import ObservationFormat
from stateflow.tasks.sql.flow import sql_flow, with_schema, without_error, without_observe, without_verify
from stateflow.tasks.sql.transforms import (
    COLUMN_ORDER,
    error_executes_only,
    submit_on_success,
    with_cut,
    with_error_budget,
    with_guard,
    with_prefix_first,
    with_question_last,
    with_schema_grammar,
    with_similar_examples,
    with_solve_examples,
    without_examples,
    without_thoughts,
)
from stateflow.tasks.sql.votes import with_answer_vote, with_vote

from stateflow import Flow

__all__ = ["SQL_LEVERS", "SQL_LEVERS_LIST", "build_sql_flow", "sql_recipe_flow"]

_SQL = ("intercode-sql",)
_DEV = 'docs/results-history.md, "Levers on the development sample (issue 15)"'
_WON = 'docs/results-history.md, "What won, what did not (2026-11-24)"'
_VOTES = 'docs/results-history.md, "Two more votes, toward 65 % (2026-11-26)"'
_SHOTS = 'docs/results-history.md, "A grammar bound to the schema, and worked answers (2026-11-26)"'
_BUDGET = 'docs/results-history.md, "The paper\'s flows on the 1.5B model, and an Error budget (2026-11-25)"'
_PAPER = 'docs/results-history.md, "The paper\'s three methods on the 0.5B model (2026-11-25)"'
_THROUGHPUT = 'docs/results.md, "Throughput on the embedded model (issue 49)"'


def _solve_rule(line: str) -> Any:
    def apply(flow: Flow, ctx: LeverContext) -> Flow:
        return flow.variant(flow.name, replace=[flow.states["Solve"].with_instruction(line)])

    return apply


def _fewest_tables(flow: Flow, ctx: LeverContext) -> Flow:
    # the rule is kept out of prompts/sql, whose hash identifies every recorded SQL run
    return _solve_rule(load_prompt("sql-levers", "fewest_tables").strip())(flow, ctx)


SQL_LEVERS_LIST: tuple[Lever, ...] = (
    # -- set when the base flow is built: which execute tool every acting state runs ----------
    Lever(
        "rebind",
        "a SELECT's columns read through the wrong table alias are moved to the table that has them",
        applies_to=_SQL,
        effect=f"{_WON}: neutral on the one-shot (41 -> 41 %), kept because it costs nothing",
        base={"rebind": True},
    ),
    Lever(
        "hint",
        'an "Unknown column" error says which tables have the column',
        applies_to=_SQL,
        effect=f"{_WON}: sf_agent_direct -> sf_agent_hint 52 -> 55 % (3 won / 0 lost)",
        base={"hint": True},
    ),
    # -- the framework's anti-waste parts on every LLM call -----------------------------------
    Lever(
        "guard",
        "a reply repeating a statement already run is re-asked; a repeat after that submits",
        applies_to=_SQL,
        effect=f"{_DEV}: part of sf_agent_tuned (with schema, cut, column_order)",
        apply=lambda flow, ctx: with_guard(flow),
    ),
    Lever(
        "cut",
        "digit and character runs (LIMIT 100000000...) are cut before they reach the database",
        applies_to=_SQL,
        effect=f"{_DEV}: part of sf_agent_tuned (with schema, guard, column_order)",
        apply=lambda flow, ctx: with_cut(flow),
    ),
    # -- what the states are shown -------------------------------------------------------------
    Lever(
        "schema",
        "Init lists every table with its columns (no LLM call) and Observe is skipped",
        applies_to=_SQL,
        conflicts=("no_observe",),
        effect=f"{_DEV}: small models need it; every tuned flow builds on it",
        apply=lambda flow, ctx: with_schema(flow, values=ctx.setting("values") if ctx.has("values") else 0),
    ),
    Lever(
        "values",
        "the schema listing also shows N (default 3) frequent values of each text column",
        needs=("schema",),
        setting=3,
        applies_to=_SQL,
        effect=f"{_WON}: sf_agent_hint -> sf_agent_values 55 -> 57 % (7 won / 5 lost), 1.8x the time",
        # read by the schema lever's transform (the values are part of the listing)
    ),
    Lever(
        "column_order",
        "Solve is told to put the columns in the order the question names them",
        applies_to=_SQL,
        effect=f"{_DEV}: part of sf_agent_tuned (InterCode compares rows as whole tuples)",
        apply=_solve_rule(COLUMN_ORDER),
    ),
    Lever(
        "fewest_tables",
        "Solve is told to join a table only for a column the others lack",
        applies_to=_SQL,
        effect=f"{_SHOTS}: sf_agent_prompt_vote -> sf_agent_vote_fewest, not kept",
        apply=_fewest_tables,
    ),
    Lever(
        "no_examples",
        "every state's instruction without its worked example",
        applies_to=_SQL,
        effect=f"{_BUDGET}: the 0.5B/1.5B models copy the examples; sf_agent_lean in {_DEV}",
        apply=lambda flow, ctx: without_examples(flow),
    ),
    Lever(
        "submit_first",
        "no Verify: the first SELECT that runs is submitted; Error still repairs failures",
        applies_to=_SQL,
        conflicts=("no_verify",),
        effect=f"{_DEV}: sf_agent_repair 42 % vs sf_agent_lean 31 % (first 45 tasks)",
        apply=lambda flow, ctx: submit_on_success(flow),
    ),
    Lever(
        "no_thoughts",
        'every reply is one "Action: ..." line, with no Thought before it',
        needs=("schema",),
        applies_to=_SQL,
        effect=f"{_WON}: oneshot -> oneshot_direct 41 -> 50 % (17 won / 8 lost); sf_agent_direct 52 %",
        apply=lambda flow, ctx: without_thoughts(flow),
    ),
    Lever(
        "error_executes",
        "Error answers with a corrected statement, never submit",
        applies_to=_SQL,
        conflicts=("no_error",),
        effect=f"{_WON}: sf_agent_hint -> sf_agent_fix 55 -> 55 % (0 won / 0 lost), dropped",
        apply=lambda flow, ctx: error_executes_only(flow),
    ),
    Lever(
        "solve_examples",
        "Solve starts with four worked one-line answers",
        needs=("no_examples", "no_thoughts"),
        applies_to=_SQL,
        effect=f"{_SHOTS}: on the best flow 61.5 -> 47.7 % (first 65 tasks, 3 won / 12 lost)",
        apply=lambda flow, ctx: with_solve_examples(flow),
    ),
    Lever(
        "similar_examples",
        "Init also shows N (default 3) solved questions like this one, from other databases",
        needs=("schema", "no_thoughts"),
        setting=3,
        applies_to=_SQL,
        effect='docs/results-history.md, "Worked answers retrieved per question": 61 -> 54 % (7 won / 14 lost)',
        apply=lambda flow, ctx: with_similar_examples(flow, k=ctx.setting("similar_examples")),
    ),
    Lever(
        "question_last",
        "Init repeats the question after the schema listing",
        needs=("schema",),
        applies_to=_SQL,
        effect='docs/results-history.md, "The question after the schema...": 61 -> 66 % dev, 55 -> 59 % held out',
        apply=lambda flow, ctx: with_question_last(flow),
    ),
    Lever(
        "prefix_first",
        "the episode opens with a fixed sentence and the question comes only after the schema (prompt cache reuse)",
        needs=("question_last",),
        applies_to=_SQL,
        effect=f"{_THROUGHPUT}: measured paired against the flow without it, see the section",
        apply=lambda flow, ctx: with_prefix_first(flow),
    ),
    Lever(
        "schema_grammar",
        "with --grammar, statements may name only the listed tables and columns",
        needs=("schema",),
        applies_to=_SQL,
        effect=f"{_SHOTS}: 61 -> 61 % on the vote, 55 -> 56 % on sf_agent_hint; an option",
        apply=lambda flow, ctx: with_schema_grammar(flow) if ctx.grammar else flow,
    ),
    # -- votes ---------------------------------------------------------------------------------
    Lever(
        "vote",
        "Solve votes over N (default 5) sampled statements, run read-only, by their results",
        applies_to=_SQL,
        setting=5,
        conflicts=("answer_vote",),
        effect=f"{_WON}: on the one-shot (oneshot_direct_vote) 50 -> 50 % at 2.3x the time",
        apply=lambda flow, ctx: with_vote(flow, k=ctx.setting("vote"), rebind=ctx.has("rebind")),
    ),
    Lever(
        "answer_vote",
        "Solve votes among 3 differently prompted answers (own, no values, with a Thought)",
        needs=("values", "no_thoughts"),
        applies_to=_SQL,
        effect=f"{_WON}: sf_agent_values -> sf_agent_prompt_vote 57 -> 63 % (61 % with the early stop)",
        apply=lambda flow, ctx: with_answer_vote(flow, rebind=ctx.has("rebind"), wide=ctx.has("wide_vote")),
    ),
    Lever(
        "wide_vote",
        "the answer vote asks up to 5 variants, until two answers agree",
        needs=("answer_vote",),
        applies_to=_SQL,
        effect=f"{_VOTES}: 54 -> 50 % on the first 50 tasks (1 won / 3 lost), dropped",
        # read by the answer_vote and error_vote transforms
    ),
    Lever(
        "error_vote",
        "Error's repair is voted like Solve's answer",
        needs=("answer_vote",),
        conflicts=("no_error",),
        applies_to=_SQL,
        effect=f"{_VOTES}: 61 -> 61 % (the same reward on 100 of 100), dropped",
        apply=lambda flow, ctx: with_answer_vote(
            flow, state="Error", rebind=ctx.has("rebind"), wide=ctx.has("wide_vote")
        ),
    ),
    Lever(
        "error_budget",
        "Error answers at most N (default 1) times; the next failed statement ends the episode",
        applies_to=_SQL,
        setting=1,
        conflicts=("no_error",),
        effect=f"{_BUDGET}: stateflow_budget 11 won / 7 lost against stateflow on 1.5B",
        apply=lambda flow, ctx: with_error_budget(flow, replies=ctx.setting("error_budget")),
    ),
    # -- the paper's ablations (applied last: each drops a state others may have rewritten) ----
    Lever(
        "no_verify",
        "the paper's No_Verify: a SELECT goes back to Solve, which is told to submit when done",
        applies_to=_SQL,
        conflicts=("no_error",),
        effect=f"{_PAPER} and {_BUDGET}",
        apply=lambda flow, ctx: without_verify(flow),
    ),
    Lever(
        "no_error",
        "the paper's No_Error: a failed action goes to Verify, which is told to fix it",
        applies_to=_SQL,
        effect=f"{_PAPER} and {_BUDGET}",
        apply=lambda flow, ctx: without_error(flow),
    ),
    Lever(
        "no_observe",
        "the paper's No_Observe: Init goes straight to Solve, which is told to DESC first",
        applies_to=_SQL,
        effect=f"{_PAPER} and {_BUDGET}",
        apply=lambda flow, ctx: without_observe(flow),
    ),
)


def _base(args: Mapping[str, Any], ctx: LeverContext) -> Flow:
    fmt = ctx.options.get("fmt")
    resample = ctx.options.get("resample_repeats", True)
    return sql_flow(grammar=ctx.grammar, resample_repeats=resample, fmt=fmt, **args)


_ABLATIONS = (("observe", "no_observe"), ("verify", "no_verify"), ("error", "no_error"))


def _finish(flow: Flow, ctx: LeverContext) -> Flow:
    """Name the flow ``intercode-sql[-schema]`` plus ``-no-<state>`` per state dropped, in the
    order observe, verify, error (a state the schema skips is not an ablation)."""
    wanted = ctx.options.get("name")
    if wanted is None:
        base = "intercode-sql" + ("-schema" if ctx.has("schema") else "")
        dropped = [
            state for state, lever in _ABLATIONS if ctx.has(lever) and not (state == "observe" and ctx.has("schema"))
        ]
        wanted = base + "".join(f"-no-{s}" for s in dropped)
    return flow if flow.name == wanted else flow.variant(wanted)


SQL_LEVERS = LeverTable("intercode-sql", SQL_LEVERS_LIST, _base, _finish)


def sql_recipe_flow(
    levers: Collection[str],
    *,
    grammar: bool = False,
    settings: Mapping[str, int] | None = None,
    resample_repeats: bool = True,
    fmt: ObservationFormat | None = None,
    name: str | None = None,
) -> Flow:
    """The paper's SQL flow with ``levers`` on (names of :data:`SQL_LEVERS`), in table order.

    Args:
        levers: lever names; their order does not matter.
        settings: amounts for levers that have one (``{"values": 5}``); default: the lever's own.
        grammar, resample_repeats, fmt: as in :func:`~stateflow.tasks.sql.flow.sql_flow`.
        name: the flow's name (default: ``intercode-sql[-schema]`` plus ``-no-<state>`` per ablation).

    Raises:
        LeverError: unknown levers, missing needs or conflicts, all listed in one error.
    """
    return SQL_LEVERS.build(
        levers, grammar=grammar, settings=settings, resample_repeats=resample_repeats, fmt=fmt, name=name
    )


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
    prefix_first: bool = False,
    fmt: ObservationFormat | None = None,
    name: str | None = None,
) -> Flow:
    """The SQL flow from keyword switches: :func:`sql_recipe_flow` under the builder's old names.

    Each switch is one lever of :data:`SQL_LEVERS` (``examples=False`` is ``no_examples``,
    ``verify_then_submit=False`` is ``submit_first``, ``error_submits=False`` is
    ``error_executes``, ``error_replies=n`` is ``error_budget`` with setting ``n``...); see each
    lever's ``about`` for what it does. Two old leniencies are kept: ``observe=False`` with
    ``schema`` (the schema skips Observe anyway) and ``error_submits=False`` without Error are
    ignored rather than reported as conflicts.

    Raises:
        LeverError: unknown combinations, missing needs or conflicts, all listed in one error.
    """
    amounts = {"values": values, "vote": vote, "error_budget": error_replies, "similar_examples": similar_examples}
    switches = {
        "rebind": rebind,
        "hint": hint,
        "guard": guard,
        "cut": cut,
        "schema": schema,
        "values": values > 0,
        "column_order": column_order,
        "fewest_tables": fewest_tables,
        "no_examples": not examples,
        "submit_first": not verify_then_submit,
        "no_thoughts": not thoughts,
        "error_executes": not error_submits and error,
        "solve_examples": solve_examples,
        "similar_examples": similar_examples > 0,
        "question_last": question_last,
        "prefix_first": prefix_first,
        "schema_grammar": schema_grammar,
        "vote": vote > 0,
        "answer_vote": answer_vote,
        "wide_vote": wide_vote,
        "error_vote": error_vote,
        "error_budget": error_replies > 0,
        "no_verify": not verify,
        "no_error": not error,
        "no_observe": not observe and not schema,
    }
    levers = [lever for lever, on in switches.items() if on]
    settings = {lever: n for lever, n in amounts.items() if n > 0}
    return sql_recipe_flow(
        levers, grammar=grammar, settings=settings, resample_repeats=resample_repeats, fmt=fmt, name=name
    )
