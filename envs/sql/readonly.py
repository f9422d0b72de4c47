"""A read-only SQL executor for execution-guided voting (:class:`stateflow.vote.Vote`).

It runs candidate statements on its own connection, logged in as its own SELECT-only account,
so executing them never touches the environment's agent session: the episode's turn count, the
agent's current database and session variables, and the observation stay as they were.
"""

from __future__ import annotations

import secrets
from collections.abc import Hashable
from typing import Any

from stateflow.envs.sql.server import DatabaseScope, SqlServer

from stateflow.stable_id import stable_id

__all__ = ["EpisodeReader", "ReadOnlyExecutor"]


class ReadOnlyExecutor:
    """``executor(ctx, statement) -> rows`` for :class:`~stateflow.vote.Vote` on a SQL database.

    Args:
        server: the environment's server (``env.server``).
        database: the task's database (``env.task(i).context``).
        scope: the environment's ``database_scope``.
        statement_timeout_s: a statement running longer fails (an error candidate, never a vote).

    Returns of a call: the result rows as a tuple of tuples (hashable; ``()`` for no result set).
    Raises: the driver's error for a failing statement. Call :meth:`close` when done (it drops
    the account).
    """

    def __init__(
        self, server: SqlServer, database: str, scope: DatabaseScope = "benchmark", *, statement_timeout_s: float = 5.0
    ):
        self._server = server
        self._database = database.lower()
        self._scope = scope
        self._owner = f"{secrets.token_hex(4)}/vote"
        self._timeout = statement_timeout_s
        self._conn: Any = None

    def __call__(self, ctx: object, statement: Hashable) -> tuple[tuple[Any, ...], ...]:
        if not isinstance(statement, str):
            raise TypeError(f"a SQL action must be a string, got {type(statement).__name__}")
        if self._conn is None:
            self._conn = self._server.connect_reader(self._database, self._scope, self._owner)
        else:
            # A candidate's USE must not decide where the next candidate runs.
            self._conn.database = self._database
        cursor = self._conn.cursor()
        try:
            cursor.execute(f"SET STATEMENT max_statement_time={self._timeout:g} FOR {statement}")
            rows = cursor.fetchall() if cursor.description else []
        finally:
            cursor.close()
        return tuple(tuple(row) for row in rows)

    def close(self) -> None:
        """Close the connection and drop the account. Idempotent."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._server.drop_readers(self._owner)


@stable_id("stateflow.envs.sql.readonly.EpisodeReader")
class EpisodeReader:
    """``executor(ctx, statement) -> rows`` for :class:`~stateflow.vote.Vote` in a flow definition.

    A flow is defined before any episode exists, so this executor finds the episode's SQL
    environment in ``ctx.env`` at each call and runs the statement through a
    :class:`ReadOnlyExecutor` on the current task's database, opened and closed for the call
    (an account of its own each time: nothing is shared between episodes or threads).

    Raises (of a call): ``TypeError`` when the run's environment is not a SQL environment that
    has been reset; the driver's error for a failing statement (an error candidate).
    """

    def __init__(self, *, statement_timeout_s: float = 5.0):
        self._timeout = statement_timeout_s

    def __call__(self, ctx: Any, statement: Hashable) -> tuple[tuple[Any, ...], ...]:
        env = getattr(ctx, "env", None)
        task = getattr(env, "current_task", None)
        if env is None or task is None or not hasattr(env, "server"):
            raise TypeError("EpisodeReader needs the run's environment to be a SQL environment after reset()")
        reader = ReadOnlyExecutor(env.server, task.context, env.database_scope, statement_timeout_s=self._timeout)
        try:
            return reader(ctx, statement)
        finally:
            reader.close()
