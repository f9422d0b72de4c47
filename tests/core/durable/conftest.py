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


@pytest.fixture(params=["memory"])
def checkpointer(request, tmp_path):
    """Every checkpointer backend the runs are tested on."""
    from stateflow.checkpoint import MemoryCheckpointer

    cp = MemoryCheckpointer()
    yield cp
    cp.close()
