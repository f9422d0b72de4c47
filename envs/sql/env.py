"""``SqlEnv``: InterCode's SQL environment on a real MariaDB/MySQL server, hardened.

Observations, rewards and info keys match upstream InterCode (see ``docs/intercode.md``):
``reset`` returns ``(None, {"action_executed": True})`` (upstream's ``USE db`` result); a step
returns the list of row tuples, ``None`` for statements without a result set, or
``"Error executing query: <msg>"``; ``submit`` scores the last observation; ``skip`` gives up.

What differs is safety, invisible to a well-behaved agent:

* agent statements run as a SELECT-only account on their own connection; the gold query runs
  on a second connection (never on the agent's session), in the database the agent's session is
  in when it submits, which is where upstream's single shared connection runs it;
* ``database_scope="benchmark"`` (default) lets the account read every dataset database, so
  ``USE other_db`` moves the agent as upstream; ``"task"`` confines it to the task's database
  (``USE other_db`` is refused, the gold always runs on the task's database);
* one statement per action: several get an error observation (the connection survives);
* a server-side statement timeout plus a watchdog that kills statements running past
  ``statement_timeout + watchdog_grace`` (the agent could raise its own session limit);
* results larger than ``max_rows`` rows or ``max_chars`` characters (of ``str(rows)``) are not
  returned: the observation is an error asking for a LIMIT, the statement is killed and the
  connection replaced (memory stays bounded by roughly ``max_chars`` per environment);
* a lost connection or a dead server gives an error observation for that step; the next step
  reconnects, and a dead embedded server is restarted with pristine data.

One environment must be used by one thread at a time; several environments (one per worker
thread) may share one server.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mysql.connector
from stateflow.envs.base import EnvironmentError_, Task
from stateflow.envs.sql.reward import sql_reward
from stateflow.envs.sql.server import ACCESS_DENIED, DatabaseScope, SqlServer, check_scope
from stateflow.envs.sql.sqltext import split_statements
from stateflow.envs.sql.tasks import SqlDataset

__all__ = ["ERROR_PREFIX", "SqlEnv", "SqlLimits"]

ERROR_PREFIX = "Error executing query: "
_FIRST_CHUNK = 32
_MAX_CHUNK = 4096
# server errors after which the session is gone: killed, shutting down, gone away, lost
_CONNECTION_ENDED = frozenset({1053, 1927, 2006, 2013, 2055, 4031})
# a session may also be in this schema, readable by every account (no dataset tables in it)
_ALWAYS_USABLE_SCHEMA = "information_schema"


@dataclass(frozen=True)
class SqlLimits:
    """Resource limits for agent statements.

    Attributes:
        statement_timeout: seconds a statement may run (server-side ``max_statement_time``).
        watchdog_grace: extra seconds before the watchdog sends ``KILL QUERY``.
        max_rows: largest result (rows) returned as an observation.
        max_chars: largest result (characters of ``str(rows)``) returned as an observation.
        gold_timeout: seconds a gold query may run.
    """

    statement_timeout: float = 10.0
    watchdog_grace: float = 2.0
    max_rows: int = 50_000
    max_chars: int = 5_000_000
    gold_timeout: float = 60.0

    def __post_init__(self) -> None:
        for name in ("statement_timeout", "watchdog_grace", "max_rows", "max_chars", "gold_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"SqlLimits.{name} must be positive, got {getattr(self, name)!r}")


class _ResultTooLarge(Exception):
    pass


class _UnconvertibleResult(Exception):
    """The driver could not turn a result value into a Python object (agent-reachable, e.g. by
    changing the session's character set); the message is the driver's."""


class _Session:
    """One connection logged in as a read-only account, ``database`` selected.

    With the ``"benchmark"`` scope the account reads every dataset database; with ``"task"``
    only ``database`` (switching to another one changes the account).
    """

    def __init__(self, server: SqlServer, database: str, timeout: float, scope: DatabaseScope, owner: str) -> None:
        self.server = server
        self.generation = server.generation
        self.database = database
        self.scope = scope
        self.owner = owner
        self.connection = server.connect_reader(database, scope, owner)
        self.timeout_sql = server.session_setup_sql(timeout)
        self._apply_timeout()
        self.broken = False

    def _apply_timeout(self) -> None:
        self.connection.cmd_query(self.timeout_sql)  # not via cursor(): that pings first

    def usable(self) -> bool:
        return not self.broken and self.generation == self.server.generation

    def switch(self, database: str) -> None:
        """Start a clean session on ``database`` (session variables and temp tables reset)."""
        if database == self.database or self.scope == "benchmark":
            self.connection.cmd_reset_connection()
            self.connection.database = database
        else:
            user, password = self.server.reader(database, self.scope, self.owner)
            self.connection.cmd_change_user(username=user, password=password, database=database)
            self.database = database
        self._apply_timeout()

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a broken socket cannot say goodbye
            self.connection.close()


class SqlEnv:
    """InterCode's SQL environment (implements :class:`stateflow.envs.base.Environment`).

    Args:
        dataset: tasks and dumps (see :func:`stateflow.envs.sql.tasks.resolve_dataset`).
        server: a server holding the dataset's databases.
        limits: resource limits for agent statements.
        database_scope: ``"benchmark"`` (default, as upstream): the agent may read and ``USE``
            every dataset database and the gold runs where the agent's session is when it
            submits; ``"task"``: the agent is confined to the task's database, where the gold
            always runs. Neither scope can write anything.
        on_close: called once by :meth:`close` (e.g. to release a pooled server).

    Raises:
        ValueError: unknown ``database_scope``.

    Example:
        >>> from stateflow.envs.sql import open_sql_env
        >>> with open_sql_env("demo") as env:                        # doctest: +SKIP
        ...     env.reset(0)
        ...     env.step("SELECT count(*) FROM singer")
        ...     env.step("submit")
    """

    name = "intercode-sql"

    def __init__(
        self,
        dataset: SqlDataset,
        server: SqlServer,
        *,
        limits: SqlLimits | None = None,
        database_scope: DatabaseScope = "benchmark",
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.dataset = dataset
        self.server = server
        self.limits = limits or SqlLimits()
        self.database_scope: DatabaseScope = check_scope(database_scope)
        # own accounts for the agent and for the gold: an account may KILL its own threads
        token = secrets.token_hex(4)
        self._agent_owner, self._gold_owner = f"{token}/agent", f"{token}/gold"
        self._on_close = on_close
        self._agent: _Session | None = None
        self._gold: _Session | None = None
        self._gold_cache: dict[tuple[int, str], tuple[list[Any], bool]] = {}
        self._task: Task | None = None
        self._closed = False
        self.observation: Any = None
        self.info: dict[str, Any] = {}

    @property
    def current_task(self) -> Task | None:
        """The task of the last :meth:`reset` (``None`` before the first)."""
        return self._task

    # -- Environment protocol ------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.dataset.tasks)

    def task(self, index: int) -> Task:
        if not 0 <= index < len(self.dataset.tasks):
            raise IndexError(f"task index {index} out of range for {self.dataset.name} (0..{len(self) - 1})")
        return self.dataset.tasks[index]

    def reset(self, index: int) -> tuple[Any, dict[str, Any]]:
        """Start task ``index``: a fresh read-only session on its database.

        Returns:
            ``(None, {"action_executed": True})`` as upstream (its ``USE db`` has no result set).

        Raises:
            IndexError: no such task.
            EnvironmentError_: the server is unreachable even after recovery.
        """
        self._check_open()
        task = self.task(index)
        database = task.context.lower()
        self._agent = self._session(self._agent, database, self.limits.statement_timeout, owner=self._agent_owner)
        self._task = task
        self.observation = None
        self.info = {"action_executed": True}
        return self.observation, dict(self.info)

    def step(self, action: str) -> tuple[Any, float, bool, dict[str, Any]]:
        """Execute one action (``submit`` scores the last observation, ``skip`` gives up)."""
        self._check_open()
        if self._task is None:
            raise EnvironmentError_("call reset(index) before step()")
        if not isinstance(action, str):
            raise TypeError(f"an action must be a string, got {type(action).__name__}")
        if action == "skip":
            return "skipped", 0, True, {}
        if action.startswith("submit"):
            return self._submit()
        self.observation, executed = self._execute(action)
        self.info = {"action_executed": executed}
        return self.observation, 0, False, dict(self.info)

    def close(self) -> None:
        """Close connections and release the server. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for session in (self._agent, self._gold):
            if session is not None:
                session.close()
        self._agent = self._gold = None
        for owner in (self._agent_owner, self._gold_owner):
            with contextlib.suppress(mysql.connector.Error, OSError, EnvironmentError_):
                self.server.drop_readers(owner)  # a server that is gone has nothing left to drop
        if self._on_close is not None:
            self._on_close()

    def __enter__(self) -> SqlEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- scoring -----------------------------------------------------------------------------------
    def gold_rows(self, index: int, database: str | None = None) -> tuple[list[Any], bool]:
        """The gold query's rows for task ``index`` and whether the gold query errored (cached).

        Args:
            index: the task.
            database: where to run the gold query (default: the task's database). A database
                without the gold's tables makes it error, which scores as an empty result.

        Raises:
            EnvironmentError_: the server failed twice.
        """
        task = self.task(index)
        home = task.context.lower()
        where = (database or home).lower()
        cached = self._gold_cache.get((index, where))
        if cached is not None:
            return cached
        for attempt in (1, 2):
            self._gold = self._session(self._gold, where, self.limits.gold_timeout, owner=self._gold_owner, home=home)
            cursor = self._gold.connection.cursor()
            try:
                cursor.execute(task.gold)
                result: tuple[list[Any], bool] = (cursor.fetchall() if cursor.description else [], False)
                break
            except (mysql.connector.InterfaceError, mysql.connector.OperationalError) as err:
                self._gold.broken = True
                self.server.recover(self._gold.generation)
                if attempt == 2:
                    raise EnvironmentError_(f"gold query of task {index} failed twice: {err}") from err
            except mysql.connector.Error:
                result = ([], True)  # a corrupt gold scores as an empty result, as upstream
                break
            finally:
                _close_quietly(cursor)
        self._gold_cache[(index, where)] = result
        return result

    def _agent_database(self) -> str:
        """The database the agent's session is in: where upstream's shared connection runs the gold.

        The task's database with the ``"task"`` scope, and whenever the session cannot say (lost
        connection, or an answer garbled by the agent's own character-set settings): the next
        step reconnects the agent there.
        """
        assert self._task is not None
        home = self._task.context.lower()
        session = self._agent
        if self.database_scope == "task" or session is None or not session.usable():
            return home
        try:
            # an explicit LIMIT overrides any sql_select_limit the agent set on its session
            session.connection.cmd_query("SELECT DATABASE() LIMIT 1")
            rows, _eof = session.connection.get_rows()
        except (mysql.connector.Error, ValueError):
            session.broken = True
            return home
        name = rows[0][0] if rows else None
        if isinstance(name, str) and (name.lower() in self.server.databases or name.lower() == _ALWAYS_USABLE_SCHEMA):
            return name.lower()
        session.broken = True
        return home

    def _submit(self) -> tuple[Any, float, bool, dict[str, Any]]:
        assert self._task is not None
        gold, corrupt = self.gold_rows(self._task.index, self._agent_database())
        reward = sql_reward(self.observation, gold)
        self.info = {
            "agent_obs": str(self.observation),
            "corrupt_gold": corrupt,
            "eval_obs": str(gold),
            "reward": reward,
            "action_executed": True,
        }
        return self.observation, reward, True, dict(self.info)

    # -- execution ---------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise EnvironmentError_("this SqlEnv is closed; open a new one with open_sql_env()")

    def _session(
        self, session: _Session | None, database: str, timeout: float, *, owner: str, home: str | None = None
    ) -> _Session:
        """``session`` switched to ``database``, or a new one (logged in as ``owner``'s account) if it is unusable.

        ``home`` (default ``database``) is the dataset database a new session logs in to before
        switching; it matters when ``database`` is not a dataset database (information_schema).
        """
        home = home or database
        for attempt in (1, 2):
            try:
                if session is not None and session.usable():
                    session.switch(database)
                    return session
                if session is not None:
                    session.close()
                session = _Session(self.server, home, timeout, self.database_scope, owner)
                if database != home:
                    session.switch(database)
                return session
            except (mysql.connector.Error, OSError) as err:
                if session is not None:
                    session.broken = True
                if getattr(err, "errno", None) == ACCESS_DENIED:
                    with contextlib.suppress(mysql.connector.Error):
                        self.server.repair_reader(home, self.database_scope, owner)  # the agent changed its password
                seen = session.generation if session is not None else self.server.generation
                self.server.recover(seen)
                if attempt == 2:
                    raise EnvironmentError_(
                        f"cannot open a session on database {database!r} at {self.server.endpoint}: {err}"
                    ) from err
        raise AssertionError("unreachable")

    def _execute(self, action: str) -> tuple[Any, bool]:
        statements = split_statements(action)
        if len(statements) > 1:
            return (
                f"{ERROR_PREFIX}only one SQL statement per action is allowed (got {len(statements)}); "
                "send them one at a time",
                False,
            )
        if not statements:
            return f"{ERROR_PREFIX}Query was empty", False
        assert self._task is not None
        if self._agent is None or not self._agent.usable():
            try:
                self._agent = self._session(
                    self._agent, self._task.context.lower(), self.limits.statement_timeout, owner=self._agent_owner
                )
            except EnvironmentError_ as err:
                return f"{ERROR_PREFIX}{err}", False
        session = self._agent
        connection = session.connection
        token = self.server.watchdog.arm(
            connection.connection_id, self.limits.statement_timeout + self.limits.watchdog_grace
        )
        try:
            # cmd_query rather than a cursor: Connection.cursor() pings the server (a second
            # round trip); the observation is the same as upstream's cursor.execute/fetchall
            result = connection.cmd_query(action)
            rows = self._fetch_bounded(connection) if result.get("columns") else None
            return rows, True
        except _ResultTooLarge:
            session.broken = True
            self.server.watchdog.disarm(token)
            with contextlib.suppress(Exception):  # server trouble surfaces on the next step
                self.server._kill_query(connection.connection_id)
            return (
                f"{ERROR_PREFIX}result too large to show (more than {self.limits.max_rows} rows or "
                f"{self.limits.max_chars} characters); use LIMIT, WHERE or an aggregate",
                False,
            )
        except _UnconvertibleResult as err:
            session.broken = True  # the rest of the result is still unread
            return f"{ERROR_PREFIX}cannot convert a value of the result: {err}", False
        except mysql.connector.Error as err:
            if (
                isinstance(err, mysql.connector.InterfaceError | mysql.connector.OperationalError)
                or err.errno in _CONNECTION_ENDED
                or connection.unread_result
            ):
                session.broken = True
                self._recover_quietly(session)
            return f"{ERROR_PREFIX}{err.msg}", False
        except BaseException:
            # anything else is a bug of ours (or an interrupt): it must reach the runner, which
            # records the episode as errored, never the agent as an "Error executing query"
            session.broken = True
            raise
        finally:
            self.server.watchdog.disarm(token)

    def _recover_quietly(self, session: _Session) -> None:
        with contextlib.suppress(EnvironmentError_):  # the next step reports it through its observation
            self.server.recover(session.generation)

    def _fetch_bounded(self, connection: Any) -> list[Any]:
        """All rows of the pending result, or ``_ResultTooLarge`` once a limit is exceeded.

        Rows are read in chunks sized from the average row length so far, so at most about
        ``max_chars`` characters are held before the limit is noticed.
        """
        limits = self.limits
        rows: list[Any] = []
        chars = 0
        chunk = _FIRST_CHUNK
        while True:
            part, eof = _read_rows(connection, chunk)
            rows.extend(part)
            if part:
                chars += len(str(part))
            if len(rows) > limits.max_rows or chars > limits.max_chars:
                raise _ResultTooLarge
            if eof is not None or not connection.unread_result:
                return rows
            average = max(1.0, chars / max(1, len(rows)))
            chunk = int(min(_MAX_CHUNK, limits.max_rows + 1 - len(rows), (limits.max_chars - chars) / average + 1))
            chunk = max(1, chunk)


def _read_rows(connection: Any, count: int) -> tuple[list[Any], Any]:
    """Up to ``count`` rows of the pending result, converted by the driver.

    Raises:
        _UnconvertibleResult: the driver's conversion of a value failed (``ValueError``, which
            includes ``UnicodeDecodeError``); server and protocol errors pass unchanged.
    """
    try:
        return connection.get_rows(count=count)
    except ValueError as err:
        raise _UnconvertibleResult(str(err)) from err


def _close_quietly(cursor: Any) -> None:
    with contextlib.suppress(Exception):  # the connection may be gone
        cursor.close()
