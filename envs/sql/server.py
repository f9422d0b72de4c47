"""What every SQL backend provides: connections, read-only accounts, kills, checksums.

A :class:`SqlServer` is one MariaDB/MySQL server holding a dataset's databases. Backends
(embedded child process, Docker container, external DSN) differ only in how the server is
reached, started and restarted; the safety machinery lives here so all share it:

* SELECT-only accounts (``GRANT SELECT, SHOW VIEW``), created lazily with a random password:
  for the ``"benchmark"`` scope one account reading every dataset database (an agent may ``USE``
  another one, as upstream's admin connection can), for the ``"task"`` scope one account per
  database (an agent cannot leave its task's database); no account can write anywhere; each
  environment asks for its own accounts (an ``owner``), so an agent cannot see or ``KILL`` the
  sessions of another environment or of its own gold query (an account may kill its own threads);
* an admin connection (guarded by the server's lock) for account set-up, ``KILL QUERY`` and
  checksums; agent statements never run on it;
* a :class:`~stateflow.envs.sql.watchdog.QueryWatchdog`;
* ``recover``: after a connection error, restart the server if it died (embedded only) and
  bump ``generation`` so every environment reconnects.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, get_args

import mysql.connector
from mysql.connector.constants import ClientFlag
from stateflow.envs.base import EnvironmentError_
from stateflow.envs.sql.watchdog import QueryWatchdog

__all__ = [
    "ACCESS_DENIED",
    "DATABASE_SCOPES",
    "DatabaseScope",
    "Endpoint",
    "SqlServer",
    "check_scope",
    "open_connection",
    "quote_name",
]

ACCESS_DENIED = 1045  # ER_ACCESS_DENIED_ERROR: wrong password

DatabaseScope = Literal["benchmark", "task"]
"""Which databases an agent's account may read.

``"benchmark"`` (default, as upstream): every database of the dataset, so ``USE other_db`` moves
the agent's session and the gold query follows it. ``"task"``: only the task's own database;
``USE other_db`` is refused and the gold always runs on the task's database.
"""

DATABASE_SCOPES: tuple[str, ...] = get_args(DatabaseScope)


def check_scope(scope: str) -> DatabaseScope:
    """``scope`` if it is a :data:`DatabaseScope`.

    Raises:
        ValueError: any other value; the message lists the valid ones.
    """
    if scope not in DATABASE_SCOPES:
        raise ValueError(f"unknown database scope {scope!r}; choose one of {', '.join(DATABASE_SCOPES)}")
    return scope  # type: ignore[return-value]


@dataclass(frozen=True)
class Endpoint:
    """Where a server listens: a Unix socket, or a host and port."""

    host: str | None = None
    port: int | None = None
    unix_socket: str | None = None

    def connect_kwargs(self) -> dict[str, Any]:
        if self.unix_socket:
            return {"unix_socket": self.unix_socket}
        return {"host": self.host or "127.0.0.1", "port": self.port or 3306}

    def __str__(self) -> str:
        return self.unix_socket or f"{self.host}:{self.port}"


def open_connection(
    endpoint: Endpoint, user: str, password: str, database: str | None = None, *, timeout: float = 10.0
) -> Any:
    """A mysql-connector connection with the settings every part of this package relies on.

    Autocommit; utf8mb4 with ``utf8mb4_general_ci`` (connector 26 defaults to MySQL-8-only
    ``utf8mb4_0900_ai_ci``); multi-statements and ``LOAD DATA LOCAL`` disabled at the protocol
    level, so ``"SELECT 1; DROP ..."`` is a syntax error on the server, never two statements.
    The pure-Python protocol is used explicitly (the C extension does not load on Debian 12).
    """
    kwargs: dict[str, Any] = {
        **endpoint.connect_kwargs(),
        "user": user,
        "password": password,
        "autocommit": True,
        "use_pure": True,
        "charset": "utf8mb4",
        "collation": "utf8mb4_general_ci",
        "client_flags": [-ClientFlag.MULTI_STATEMENTS, -ClientFlag.MULTI_RESULTS, -ClientFlag.LOCAL_FILES],
        "allow_local_infile": False,
        "connection_timeout": timeout,
    }
    if database:
        kwargs["database"] = database
    return mysql.connector.connect(**kwargs)


def quote_name(name: str) -> str:
    """A backquoted SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


class SqlServer(ABC):
    """A server with a dataset's databases, shared by any number of environments (thread-safe).

    Args:
        databases: the lower-cased database names agents may be given access to.
    """

    kind: str = "abstract"

    def __init__(self, databases: frozenset[str]) -> None:
        self.databases = databases
        self.generation = 0
        self.flavor = "mariadb"
        self._lock = threading.RLock()
        self._token = secrets.token_hex(4)
        # (owner, granted databases) -> (user, password)
        self._readers: dict[tuple[str, tuple[str, ...]], tuple[str, str]] = {}
        self._created_accounts: list[str] = []
        self._account_serial = 0
        self._admin: Any = None
        self._closed = False
        self.watchdog = QueryWatchdog(self._kill_query)

    # -- backend specifics -------------------------------------------------------------------
    @property
    @abstractmethod
    def endpoint(self) -> Endpoint:
        """Where to connect (may change after a restart)."""

    @abstractmethod
    def admin_login(self) -> tuple[str, str]:
        """User and password of an account allowed to create users and kill queries."""

    def _restart(self) -> None:
        """Bring a dead server back with pristine data; external servers cannot."""
        raise EnvironmentError_(f"the {self.kind} SQL server at {self.endpoint} is unreachable; check it and retry")

    def _shutdown(self) -> None:
        """Release backend resources (stop a process or container); default: nothing."""
        return None

    # -- shared machinery ------------------------------------------------------------------
    @contextmanager
    def admin(self) -> Iterator[Any]:
        """A cursor on the admin connection, holding the server lock for its duration."""
        with self._lock:
            if self._closed:
                raise EnvironmentError_(f"the {self.kind} SQL server was closed")
            if self._admin is None:
                user, password = self.admin_login()
                self._admin = open_connection(self.endpoint, user, password)
                if "mariadb" not in str(self._admin.server_info).lower():
                    self.flavor = "mysql"
            cursor = self._admin.cursor()
            try:
                yield cursor
            except (mysql.connector.InterfaceError, mysql.connector.OperationalError):
                self._drop_admin()
                raise
            finally:
                with contextlib.suppress(Exception):  # a dead connection cannot close its cursor cleanly
                    cursor.close()

    def _drop_admin(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            with contextlib.suppress(Exception):  # already broken
                admin.close()

    def reader(self, database: str, scope: DatabaseScope = "task", owner: str = "shared") -> tuple[str, str]:
        """User and password of a SELECT-only account that can read ``database`` (created on first use).

        Args:
            database: a dataset database.
            scope: ``"task"``: an account reading ``database`` alone; ``"benchmark"``: an account
                reading every dataset database.
            owner: who uses the account; owners never share one (see :meth:`drop_readers`).

        Raises:
            EnvironmentError_: ``database`` is not one of this server's dataset databases.
        """
        key = database.lower()
        with self._lock:
            if key not in self.databases:
                raise EnvironmentError_(
                    f"database {database!r} is not part of this dataset (have: {sorted(self.databases)})"
                )
            grants = tuple(sorted(self.databases)) if check_scope(scope) == "benchmark" else (key,)
            found = self._readers.get((owner, grants))
            if found:
                return found
            user = f"sf_{self._token}_{self._account_serial}"
            self._account_serial += 1
            password = secrets.token_urlsafe(18)
            with self.admin() as cur:
                cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
                self._created_accounts.append(user)
                for name in grants:
                    cur.execute(f"GRANT SELECT, SHOW VIEW ON {quote_name(name)}.* TO '{user}'@'%'")
            self._readers[(owner, grants)] = (user, password)
            return user, password

    def connect_reader(
        self, database: str, scope: DatabaseScope = "task", owner: str = "shared", *, timeout: float = 10.0
    ) -> Any:
        """A new connection as a read-only account (see :meth:`reader`), with ``database`` selected.

        An agent may change its own account's password (``SET PASSWORD`` needs no privilege);
        a refused login therefore restores the password once and retries.
        """
        user, password = self.reader(database, scope, owner)
        try:
            return open_connection(self.endpoint, user, password, database.lower(), timeout=timeout)
        except mysql.connector.ProgrammingError as err:
            if err.errno != ACCESS_DENIED:
                raise
            self.repair_reader(database, scope, owner)
            return open_connection(self.endpoint, user, password, database.lower(), timeout=timeout)

    def repair_reader(self, database: str, scope: DatabaseScope = "task", owner: str = "shared") -> None:
        """Restore the password of the read-only account :meth:`reader` gives for these arguments."""
        user, password = self.reader(database, scope, owner)
        with self.admin() as cur:
            cur.execute(f"ALTER USER '{user}'@'%' IDENTIFIED BY '{password}'")

    def drop_readers(self, owner: str) -> None:
        """Drop every account created for ``owner`` (its sessions should be closed first).

        Raises:
            mysql.connector.Error, EnvironmentError_: the server cannot be reached.
        """
        with self._lock:
            mine = [key for key in self._readers if key[0] == owner]
            if not mine:
                return
            with self.admin() as cur:
                for key in mine:
                    user, _password = self._readers.pop(key)
                    cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
                    self._created_accounts.remove(user)

    def session_setup_sql(self, seconds: float) -> str:
        """The ``SET SESSION`` statement every environment session starts with.

        It limits statement run time to ``seconds`` and, on MariaDB, makes internal temporary
        tables on-disk (Aria): with in-memory ones MariaDB breaks ties in ``ORDER BY ... LIMIT``
        by row address, so a query with ties (12 Spider golds) returns different rows on
        different connections. With Aria the order is reproducible; cost ~0.5 ms per GROUP BY.
        """
        if self.flavor == "mysql":
            return f"SET SESSION max_execution_time={max(1, int(seconds * 1000))}"
        return f"SET SESSION max_statement_time={seconds:g}, tmp_memory_table_size=0"

    def _kill_query(self, connection_id: int) -> None:
        # "Unknown thread id" means the statement already ended: nothing to kill
        with self.admin() as cur, contextlib.suppress(mysql.connector.DatabaseError):
            cur.execute(f"KILL QUERY {int(connection_id)}")

    def checksum(self, database: str) -> dict[str, int | None]:
        """``CHECKSUM TABLE`` of every table in ``database`` (for verifying nothing changed)."""
        with self.admin() as cur:
            cur.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY table_name",
                (database.lower(),),
            )
            tables = [row[0] for row in cur.fetchall()]
            if not tables:
                return {}
            cur.execute(
                "CHECKSUM TABLE " + ", ".join(f"{quote_name(database.lower())}.{quote_name(t)}" for t in tables)
            )
            return {str(name): value for name, value in cur.fetchall()}

    def snapshot(self) -> dict[str, Any]:
        """Checksums of every dataset database plus the server's database and account lists."""
        with self.admin() as cur:
            cur.execute("SHOW DATABASES")
            names = sorted(row[0] for row in cur.fetchall())
            cur.execute("SELECT user, host FROM mysql.user ORDER BY user, host")
            accounts = sorted(f"{u}@{h}" for u, h in cur.fetchall())
        return {
            "databases": names,
            "accounts": accounts,
            "checksums": {db: self.checksum(db) for db in sorted(self.databases)},
        }

    def is_alive(self) -> bool:
        """Whether the admin connection can reach the server (reconnecting if needed)."""
        try:
            with self.admin() as cur:
                cur.execute("SELECT 1")
                cur.fetchall()
            return True
        except (mysql.connector.Error, OSError):
            return False

    def recover(self, seen_generation: int) -> None:
        """Called after a connection error seen at ``seen_generation``.

        If another environment already recovered (generation moved on), nothing happens; if the
        server still answers, only the caller's connection was lost; otherwise the server is
        restarted (embedded) or an :class:`EnvironmentError_` explains it is unreachable.
        """
        with self._lock:
            if self.generation != seen_generation or self.is_alive():
                return
            self._drop_admin()
            self._restart()
            self._readers.clear()
            self._created_accounts.clear()  # the restarted server has none of them
            self.generation += 1

    def close(self) -> None:
        """Drop the accounts this object created, stop the watchdog and the backend. Idempotent."""
        self.watchdog.close()  # outside the lock: a pending kill may be waiting for it
        with self._lock:
            if self._closed:
                return
            if self._created_accounts and self.kind != "embedded":
                try:
                    with self.admin() as cur:
                        for user in self._created_accounts:
                            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
                except (mysql.connector.Error, OSError):
                    pass  # the server is gone; nothing left to clean there
            self._drop_admin()
            self._closed = True
            self._shutdown()
