"""The environment as a StateFlow tool, and the conditions the task flows branch on.

:func:`execute` builds the tool that runs the agent's action (or a fixed command, e.g. Init's
``SHOW TABLES``) in the run's InterCode environment (``ctx.env``) and reports structured facts in
the message's ``meta`` as an :class:`~stateflow.tasks.kit.blackboard.Observation`: ``ok`` (upstream's
``action_executed``), ``done``, ``reward``, ``action`` and ``statement`` (the command's first keyword).

Episode bookkeeping lives in the run's :class:`~stateflow.tasks.kit.blackboard.EpisodeVars`
(``ctx.board``): turns (environment interactions), failed actions, the reward after a submit.
The turn limit is the user's variable ``max_turns``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from stateflow.tasks.kit.actions import Action, parse_action, statement_kind
from stateflow.tasks.kit.blackboard import EpisodeVars, Observation

from stateflow import Condition, Context, Kind, Tool, ToolResult, meta_is, predicate
from stateflow.stable_id import stable_id

__all__ = [
    "ErrorHint",
    "ObservationFormat",
    "Rewritten",
    "StatementRewrite",
    "action_failed",
    "describe_schema",
    "env_done",
    "execute",
    "failure_text",
    "repeats_last_action",
    "restate_question",
    "statement_is",
    "strip_values",
    "submit",
    "turns_exhausted",
]


class Rewritten(Protocol):
    """What a :data:`StatementRewrite` returns: the statement to run and what changed in it."""

    @property
    def statement(self) -> str: ...

    @property
    def changes(self) -> Sequence[str]: ...

    @property
    def changed(self) -> bool: ...


#: rewrites a SELECT before it runs, from each table's listed columns (SQL's column re-binding is one)
StatementRewrite = Callable[[str, Mapping[str, Sequence[str]]], Rewritten]
#: one sentence placed under a failed action's error, from each table's listed columns, or ``None``
ErrorHint = Callable[[str, Mapping[str, Sequence[str]]], "str | None"]


@dataclass(frozen=True)
class ObservationFormat:
    """How observations are shown to the agent (scoring always uses the full observation).

    Upstream's runners cut observations to 350 characters or 25 rows. ``full_schema`` keeps
    ``SHOW``/``DESC`` results whole so the agent sees every column name: a documented deviation
    from upstream (agent-visible only; rewards are unaffected), off with ``full_schema=False``.
    ``flag_repeats`` adds a note when the agent repeats its previous action verbatim (small
    models at temperature 0 tend to loop on one wrong command).
    """

    max_chars: int = 350
    max_rows: int = 25
    full_schema: bool = True
    flag_repeats: bool = True

    def render(self, observation: object, statement: str) -> str:
        rows = None
        if isinstance(observation, list):
            rows = len(observation)
            if rows > self.max_rows:
                observation = observation[: self.max_rows]
        text = str(observation)
        keep_whole = self.full_schema and statement in ("SHOW", "DESC")
        if not keep_whole and len(text) > self.max_chars:
            text = text[: self.max_chars] + "..."
        if rows is not None and rows > self.max_rows:
            text += f" ({rows} rows in total, first {self.max_rows} shown)"
        return text


REPEAT_NOTE = "\n(Note: you already ran exactly this command and got this result. Try a different action.)"
INVALID_ACTION = (
    "Invalid response format. Reply with a 'Thought: ...' line and then either "
    "'Action: execute[<command>]' or 'Action: submit'."
)


REBIND_NOTE = "\n(Note: ran with columns moved to the tables that have them: {changes}.)"


def execute(
    command: str | None = None,
    *,
    fmt: ObservationFormat | None = None,
    rebind: StatementRewrite | None = None,
    hint: ErrorHint | None = None,
    name: str | None = None,
) -> Tool:
    """A tool that runs ``command`` (or the action parsed from the last LLM message).

    An unparseable response becomes a failed action with an explanation (it costs a turn, like
    an invalid command upstream), so the flow routes it to its error handling.

    Args:
        command: a fixed command (e.g. Init's ``SHOW TABLES``); ``None`` runs the agent's action.
        fmt: how the observation is shown.
        rebind: rewrites a SELECT before it runs, from the columns ``describe_schema`` listed
            (without a listed schema nothing changes); SQL passes
            :func:`~stateflow.tasks.sql.rebind.rebind_columns`. The statement that ran is
            recorded as the action and the observation says what moved. Passed in, so this
            generic tool imports no benchmark's code.
        hint: under a failed action's error, one sentence from the listed columns; SQL passes
            :func:`~stateflow.tasks.sql.hints.unknown_column_hint`.
        name: the tool's name (default ``execute``, with ``_rebound`` and ``_hinted`` appended for
            those options: the name is part of the flow's fingerprint, so they never share records).
    """
    fmt = fmt or ObservationFormat()
    name = name or "execute" + ("_rebound" if rebind is not None else "") + ("_hinted" if hint is not None else "")

    @stable_id("stateflow.tasks.tools.execute.<locals>.run_action")
    def run_action(ctx: Context) -> ToolResult:
        env = ctx.env
        if env is None:
            raise RuntimeError("the execute tool needs an environment: run(..., env=ENV)")
        if command is not None:
            action = Action("execute", command)
        else:
            last = ctx.history.last(Kind.LLM)
            action = parse_action(last.content if last else "")
        ep = EpisodeVars.of(ctx)
        if action.kind == "invalid":
            ep.count_turn(failed=True)
            return ToolResult(INVALID_ACTION, Observation(ok=False).meta())
        note = ""
        if (
            rebind is not None
            and action.kind == "execute"
            and ep.columns
            and statement_kind(action.command) == "SELECT"
        ):
            rebound = rebind(action.command, ep.columns)
            if rebound.changed:
                action = Action("execute", rebound.statement)
                note = REBIND_NOTE.format(changes=", ".join(rebound.changes))
        observation, reward, done, info = env.step(action.as_env_action())
        if action.kind == "submit":
            ep.submitted(reward, info)
            text = f"Submitted. Reward: {reward}"
            return ToolResult(text, Observation(ok=True, done=True, action="submit", reward=reward).meta())
        ok = bool(info.get("action_executed", True))
        ep.count_turn(failed=not ok)
        statement = statement_kind(action.command)
        if ok and statement == "SHOW" and isinstance(observation, list):
            # Remembered for grammars that may only name real tables (see stateflow.tasks.kit.grammar).
            ep.tables = [str(row[0]) for row in observation if row]
        text = fmt.render(observation, statement)
        if text == "":
            text = "(no output)"
        repeated = fmt.flag_repeats and ep.last_action == action.command
        if hint is not None and not ok and ep.columns:
            where = hint(str(observation), ep.columns)
            note += f"\n(Note: {where})" if where else ""
        text += note
        if repeated:
            text += REPEAT_NOTE
        ep.last_action = action.command
        ep.done = bool(done)
        return ToolResult(text, Observation(ok, bool(done), action.command, statement, repeated).meta())

    return Tool(run_action, name)


def submit(*, name: str = "submit") -> Tool:
    """A tool that submits the last result (no LLM call), for flows that end on their own terms.

    The environment scores what the last executed statement (SQL) or the shell's state (Bash)
    gives, exactly as when an agent writes ``Action: submit``; the episode's reward is recorded
    and the observation's ``done`` ends the flow.
    """

    @stable_id("stateflow.tasks.tools.submit.<locals>.run_submit")
    def run_submit(ctx: Context) -> ToolResult:
        env = ctx.env
        if env is None:
            raise RuntimeError("the submit tool needs an environment: run(..., env=ENV)")
        _, reward, _, info = env.step(Action("submit", "").as_env_action())
        EpisodeVars.of(ctx).submitted(reward, info)
        return ToolResult(
            f"Submitted. Reward: {reward}", Observation(ok=True, done=True, action="submit", reward=reward).meta()
        )

    return Tool(run_submit, name)


FOREIGN_KEYS_SQL = (
    "SELECT TABLE_NAME, COLUMN_NAME, REFERENCED_TABLE_NAME, REFERENCED_COLUMN_NAME "
    "FROM information_schema.KEY_COLUMN_USAGE "
    "WHERE TABLE_SCHEMA = DATABASE() AND REFERENCED_TABLE_NAME IS NOT NULL "
    "ORDER BY TABLE_NAME, COLUMN_NAME"
)


MAX_VALUE_CHARS = 30
"""The longest example value :func:`describe_schema` shows (``values``)."""

TEXT_TYPES = frozenset({"char", "varchar", "text", "tinytext", "mediumtext", "longtext", "enum", "set"})
"""Column types whose values :func:`describe_schema` samples (``values``)."""


_SCHEMA_HEADERS = ("Tables and their columns:\n", "The database:\n")  # describe_schema's two forms
_VALUE_LIST = re.compile(r": '(?:[^']|'')*'(?:/'(?:[^']|'')*')*")  # ": 'CD'/'CD / LP'" after a type


@stable_id("stateflow.tasks.tools.strip_values")
def strip_values(text: str) -> str:
    """A :func:`describe_schema` listing without its example values (the listing ``values=0``
    gives); any other text is returned unchanged.

    Used to ask for an answer as if the values had not been shown (a vote variant, see
    :func:`~stateflow.tasks.sql.flow.with_answer_vote`).
    """
    if not text.startswith(_SCHEMA_HEADERS):
        return text
    return _VALUE_LIST.sub("", text)


def _base_type(declared: object) -> str:
    """``varchar(255)`` -> ``varchar``; ``int(11) unsigned`` -> ``int``."""
    return str(declared).split("(")[0].split()[0].lower() if str(declared).strip() else "?"


def describe_schema(*, keys: bool = False, ddl: bool = False, values: int = 0, name: str | None = None) -> Tool:
    """A tool that lists every table with its columns, compactly: ``book(book_id int, title varchar)``.

    It runs ``SHOW TABLES`` and one ``DESC`` per table (no LLM call) and counts as one turn: it
    is the flow's own set-up, not an agent action. Used by the schema variant of the SQL flow.

    Args:
        keys: also list the foreign keys, one join per line (``loan.book_id = book.book_id``),
            read from ``information_schema``; databases without declared keys show none. Measured
            on the development sample it did not help the 1.5B model, which then joined tables
            the question does not need more often (docs/results.md, issue 15).
        ddl: write each table as a one-line ``CREATE TABLE book (book_id int, title varchar);``,
            the form code models meet in their training data, instead of ``book(...)``.
        values: show up to this many of each text column's most frequent values after its type
            (``genre varchar: 'novel'/'poetry'``), so a filter can use a value as the table
            stores it (``'CD'``, a country code) instead of a guess. Values longer than
            :data:`MAX_VALUE_CHARS` are left out (free text would only cost tokens).
        name: the tool's name (default ``describe_schema``, with ``_ddl``, ``_keys`` and
            ``_values<n>`` appended for those options: the name is part of the flow's fingerprint).

    Raises:
        ValueError: ``values`` < 0.
    """
    if values < 0:
        raise ValueError(f"describe_schema: values must be >= 0, got {values}")
    name = name or "describe_schema" + ("_ddl" if ddl else "") + ("_keys" if keys else "") + (
        f"_values{values}" if values else ""
    )

    def examples(env: Any, table: str, column: str) -> str:
        # The most frequent values first (they are the ones questions tend to filter on), ties
        # in value order so the listing is the same on every run.
        rows, _, _, info = env.step(
            f"SELECT `{column}` FROM `{table}` WHERE `{column}` IS NOT NULL "
            f"GROUP BY `{column}` ORDER BY COUNT(*) DESC, `{column}` LIMIT {values}"
        )
        if not info.get("action_executed", True) or not isinstance(rows, list):
            return ""
        shown = [str(r[0]) for r in rows if r and len(str(r[0])) <= MAX_VALUE_CHARS]
        return ": " + "/".join("'" + v.replace("'", "''") + "'" for v in shown) if shown else ""

    @stable_id("stateflow.tasks.tools.describe_schema.<locals>.run_schema")
    def run_schema(ctx: Context) -> ToolResult:
        env = ctx.env
        if env is None:
            raise RuntimeError("describe_schema needs an environment: run(..., env=ENV)")
        ep = EpisodeVars.of(ctx)
        ep.count_turn()
        tables, _, _, info = env.step("SHOW TABLES")
        if not info.get("action_executed", True) or not isinstance(tables, list):
            return ToolResult(str(tables), Observation(ok=False, action="SHOW TABLES", statement="SHOW").meta())
        names = [str(row[0]) for row in tables if row]
        ep.tables = names
        lines = []
        for t in names:
            cols, _, _, info = env.step(f"DESC `{t}`")
            if info.get("action_executed", True) and isinstance(cols, list):
                ep.columns[t] = [str(c[0]) for c in cols]
                described = ", ".join(
                    f"{c[0]} {str(c[1]).split('(')[0]}"
                    + (examples(env, t, str(c[0])) if values and _base_type(c[1]) in TEXT_TYPES else "")
                    for c in cols
                )
            else:
                described = "?"
            lines.append(f"CREATE TABLE {t} ({described});" if ddl else f"{t}({described})")
        text = _SCHEMA_HEADERS[1 if ddl else 0] + "\n".join(lines)
        if keys:
            found, _, _, info = env.step(FOREIGN_KEYS_SQL)
            if info.get("action_executed", True) and isinstance(found, list) and found:
                joins = [f"{t}.{c} = {rt}.{rc}" for t, c, rt, rc in found]
                text += "\nForeign keys (how the tables join):\n" + "\n".join(joins)
        return ToolResult(text, Observation(ok=True, action="SHOW TABLES", statement="SHOW").meta())

    return Tool(run_schema, name)


env_done: Condition = meta_is("done", True, name="submitted")
"""The environment ended the episode (the agent submitted)."""

action_failed: Condition = meta_is("ok", False, name="action failed")
"""The last action did not execute (upstream's ``action_executed`` is False) or was malformed."""


def restate_question() -> Tool:
    """A tool that repeats the episode's question (``Question: ...``), so it can follow a long
    observation such as the schema listing.

    No LLM call, no environment action and no turn. Why: the task prompt comes first, so after
    a schema of ~1,000 tokens the question is the farthest thing from where a small model writes
    its answer; with it repeated there the best SQL flow gained 5 points (docs/results.md,
    "The question after the schema").
    """

    @stable_id("stateflow.tasks.tools.restate_question.<locals>.run_restate")
    def run_restate(ctx: Context) -> ToolResult:
        task = getattr(ctx.env, "current_task", None)
        if task is None:
            raise RuntimeError("restate_question needs an environment with a current task: run(..., env=ENV)")
        return ToolResult(f"Question: {task.query}", Observation(ok=True).meta())

    return Tool(run_restate, "restate_question")


@stable_id("stateflow.tasks.tools.repeats_last_action")
def repeats_last_action(ctx: Context, reply: str) -> bool:
    """The reply's action is exactly the previous executed command (a loop at temperature 0)."""
    action = parse_action(reply)
    return action.kind == "execute" and action.command == EpisodeVars.of(ctx).last_action


def statement_is(*keywords: str) -> Condition:
    """The last action executed successfully and starts with one of ``keywords`` (``SELECT``, ``DESC``)."""
    wanted = {k.upper() for k in keywords}

    def check(ctx: Context) -> bool:
        m = ctx.history.last(Kind.TOOL)
        seen = None if m is None else Observation.of(m.meta)
        return seen is not None and seen.ok and seen.statement.upper() in wanted

    return predicate(check, f"ran {'/'.join(sorted(wanted))}")


def turns_exhausted(limit_var: str = "max_turns") -> Condition:
    """The episode used its environment turns (the user's ``vars[limit_var]``; no limit when unset)."""

    def check(ctx: Context) -> bool:
        limit = ctx.vars.get(limit_var)
        return limit is not None and EpisodeVars.of(ctx).turns >= limit

    return predicate(check, "turn limit reached")


def failure_text(markers: Iterable[str]) -> Condition:
    """The last tool output contains one of ``markers`` (the paper's Bash error detection)."""
    items = tuple(markers)

    def check(ctx: Context) -> bool:
        m = ctx.history.last(Kind.TOOL)
        if m is None:
            return False
        seen = Observation.of(m.meta)
        malformed = seen is not None and not seen.ok and seen.action is None
        return malformed or any(x in m.content for x in items)

    return predicate(check, "output shows an error")
