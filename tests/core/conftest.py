"""Fixtures shared by the core tests: a private PostgreSQL server for the session (checkpoint stores),
one database per test."""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Iterator

import pytest

from tests.core.checkpoint.pg_server import PgServer, ServerUnavailable

_databases = itertools.count()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A throwaway PostgreSQL server (skips, saying why, where none can be started)."""
    if importlib.util.find_spec("psycopg") is None:
        pytest.skip("psycopg is not installed: pip install -e '.[postgres]' (scripts/setup.sh does)")
    try:
        server = PgServer()
        server.start()
    except ServerUnavailable as err:
        pytest.skip(f"no PostgreSQL server for the tests: {err}")
    yield server
    server.destroy()


@pytest.fixture
def pg_dsn(pg_server: PgServer) -> str:
    """The DSN of a fresh, empty database on the session's server."""
    return pg_server.create_database(f"t{next(_databases)}")
