"""Re-bind columns read through the wrong table alias, before a statement runs.

Why: on the development sample (docs/results.md, issue 15) 34 of the 59 failures of the 1.5B
model's one-shot answers were "Unknown column" errors, and every one was a real column read
through the wrong alias: ``SELECT T2.Country FROM airlines AS T1 JOIN flights AS T2 ...`` where
``Country`` belongs to ``airlines``. The model rarely repairs these itself (3 of 38 episodes that
reached the repair flow's Error state ended solved): it cannot tell which alias stands for which
table. The intent is unambiguous, so a parser can fix it.

The rule, per query scope (a subquery has its own aliases): a column qualified by an alias or
table of that scope, which that table does not have, is moved to the one other table of the
scope that has it. Nothing else changes. The statement is left as written (the database then
reports the error as before) when no table or more than one table of the scope has the column,
when a moved column would be compared with itself (``ON T1.x = T1.x``: the join would silently
become a cross join), or when the statement does not parse. Names are compared
case-insensitively, as MariaDB compares column names.

Parsing is `sqlglot <https://github.com/tobymao/sqlglot>`_'s (MySQL dialect): writing a SQL
scope resolver by hand is exactly the code a maintained parser does better. A re-bound statement
is printed back by sqlglot, so its spacing and keyword case may differ from the model's.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stateflow.tasks.kit.blackboard import EpisodeVars

from stateflow import Context
from stateflow.stable_id import stable_id

__all__ = ["RebindingExecutor", "Rebound", "rebind_columns"]


@dataclass(frozen=True)
class Rebound:
    """What :func:`rebind_columns` did.

    Attributes:
        statement: the statement to run (the input itself when nothing changed).
        changes: each re-bound column as ``"T2.Country -> T1.Country"``, in statement order.
    """

    statement: str
    changes: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.changes)


def rebind_columns(statement: str, columns: Mapping[str, Sequence[str]]) -> Rebound:
    """``statement`` with every wrongly qualified column moved to the table that has it.

    Args:
        statement: one SQL statement (anything but a query is returned unchanged).
        columns: each table's columns, as the schema lists them.
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError
    from sqlglot.optimizer.scope import traverse_scope

    known = {t.lower(): {c.lower() for c in cols} for t, cols in columns.items()}
    try:
        tree = sqlglot.parse_one(statement, read="mysql")
        scopes = traverse_scope(tree)
    except (SqlglotError, ValueError, KeyError, RecursionError):
        return Rebound(statement)
    changes: list[str] = []
    for scope in scopes:
        # alias (or bare table name) -> the table's columns, for the tables of this scope
        tables = {
            name: known[source.name.lower()]
            for name, source in scope.sources.items()
            if isinstance(source, exp.Table) and source.name.lower() in known
        }
        for column in scope.columns:
            qualifier, name = column.table, column.name.lower()
            if qualifier not in tables or name in tables[qualifier]:
                continue
            having = [alias for alias, cols in tables.items() if name in cols]
            if len(having) != 1:
                continue
            changes.append(f"{qualifier}.{column.name} -> {having[0]}.{column.name}")
            column.set("table", exp.to_identifier(having[0]))
    if not changes or any(_compares_with_itself(eq) for eq in tree.find_all(exp.EQ)):
        # a join condition that became ``T1.x = T1.x`` would turn the join into a cross join:
        # better the database's error than a wrong answer
        return Rebound(statement)
    return Rebound(tree.sql(dialect="mysql"), tuple(changes))


def _compares_with_itself(eq: object) -> bool:
    from sqlglot import exp

    assert isinstance(eq, exp.EQ)
    left, right = eq.left, eq.right
    return isinstance(left, exp.Column) and isinstance(right, exp.Column) and left == right


@dataclass(frozen=True)
@stable_id("stateflow.tasks.sql_rebind.RebindingExecutor")
class RebindingExecutor:
    """A :class:`~stateflow.vote.Vote` executor that re-binds a candidate's columns before running
    it with ``inner``, by the same rule as ``execute(rebind=True)``, so voting and acting agree
    on what a statement means.

    Uses the columns ``describe_schema`` listed in the episode; without them the statement runs
    as written.
    """

    inner: Callable[[Context, Hashable], Any]

    def __call__(self, ctx: Context, statement: Hashable) -> Any:
        columns = EpisodeVars.of(ctx).columns
        if isinstance(statement, str) and columns:
            statement = rebind_columns(statement, columns).statement
        return self.inner(ctx, statement)
