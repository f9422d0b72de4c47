"""Fixtures for the durable-run tests: a fake model server and each checkpointer backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stateflow.testing.fake_openai import FakeOpenAIServer
from tests.core.durable.flows import responder


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(responder) as srv:
        yield srv


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def checkpointer(request, tmp_path):
    """Every checkpointer backend the runs are tested on (PostgreSQL: a fresh database on the
    session's private server, tests/core/conftest.py)."""
    from stateflow.checkpoint import MemoryCheckpointer, PostgresCheckpointer, SQLiteCheckpointer

    if request.param == "memory":
        cp = MemoryCheckpointer()
    elif request.param == "sqlite":
        cp = SQLiteCheckpointer(tmp_path / "runs.db")
    else:
        cp = PostgresCheckpointer(request.getfixturevalue("pg_dsn"))
    yield cp
    cp.close()
