"""An external server the user runs, reached by DSN.

It loads the dataset's dumps when the databases are missing (data only: accounts and system
schemas in the dump are skipped, see :mod:`stateflow.envs.sql.dump`), and creates its per-database
read-only accounts with a random name and password, dropped again by ``close``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit

import mysql.connector
from stateflow.envs.base import EnvironmentError_
from stateflow.envs.sql.dump import load_dump, read_dump
from stateflow.envs.sql.server import Endpoint, SqlServer, open_connection

__all__ = ["DsnServer", "parse_dsn"]


def parse_dsn(dsn: str) -> tuple[Endpoint, str, str]:
    """Split ``mysql://user:pass@host:port`` into an endpoint, user and password.

    ``mariadb://`` is accepted too; user and password may be percent-encoded; the port
    defaults to 3306; a path (database) is ignored because each task selects its own.

    Raises:
        ValueError: the DSN is malformed; the message shows the expected form.
    """
    parts = urlsplit(dsn)
    form = "expected mysql://user:password@host:port"
    if parts.scheme not in ("mysql", "mariadb"):
        raise ValueError(f"DSN {dsn!r}: unsupported scheme {parts.scheme!r}; {form}")
    if not parts.hostname or not parts.username:
        raise ValueError(f"DSN {dsn!r}: missing host or user; {form}")
    try:
        port = parts.port or 3306
    except ValueError as err:
        raise ValueError(f"DSN {dsn!r}: invalid port; {form}") from err
    return Endpoint(host=parts.hostname, port=port), unquote(parts.username), unquote(parts.password or "")


def _ensure_loaded(server: SqlServer, dumps: Sequence[Path], load: bool) -> None:
    """Load ``dumps`` when none of the dataset's databases exist; refuse a partial set."""
    with server.admin() as cur:
        cur.execute("SHOW DATABASES")
        present = {row[0].lower() for row in cur.fetchall()}
    missing = sorted(server.databases - present)
    if not missing:
        return
    if not load or len(missing) != len(server.databases):
        raise EnvironmentError_(
            f"the {server.kind} server at {server.endpoint} lacks databases {missing}; load the dumps "
            f"{[str(d) for d in dumps]} into it (or drop the partial set and let StateFlow load them)"
        )
    with server._lock:
        user, password = server.admin_login()
        conn = open_connection(server.endpoint, user, password, timeout=30)
        try:
            for dump in dumps:
                load_dump(conn, read_dump(dump))
        finally:
            conn.close()


class DsnServer(SqlServer):
    """An external MariaDB/MySQL server reached by DSN; its admin account must be able to
    ``CREATE USER``/``GRANT`` (and, when the data is missing, create databases).

    Args:
        dsn: ``mysql://user:password@host:port``.
        dumps: dumps creating the dataset's databases (loaded only if they are all missing).
        databases: the dataset's databases.
        load: whether missing databases may be loaded.
    """

    kind = "dsn"

    def __init__(self, dsn: str, dumps: Sequence[Path], databases: frozenset[str], *, load: bool = True) -> None:
        super().__init__(databases)
        self._endpoint, self._user, self._password = parse_dsn(dsn)
        try:
            with self.admin() as cur:
                cur.execute("SELECT 1")
                cur.fetchall()
        except mysql.connector.Error as err:
            raise EnvironmentError_(
                f"cannot connect to the SQL server {self._endpoint} as {self._user}: {err}"
            ) from err
        _ensure_loaded(self, dumps, load)

    @property
    def endpoint(self) -> Endpoint:
        return self._endpoint

    def admin_login(self) -> tuple[str, str]:
        return self._user, self._password
