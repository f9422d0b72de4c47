"""MemoryCheckpointer against the conformance suite."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from stateflow.checkpoint import MemoryCheckpointer
from tests.core.checkpoint.contract import CheckpointerContract


class TestMemoryCheckpointer(CheckpointerContract):
    @pytest.fixture
    def cp(self) -> Iterator[MemoryCheckpointer]:
        store = MemoryCheckpointer()
        yield store
        store.close()

    def other(self, cp: MemoryCheckpointer) -> MemoryCheckpointer:  # type: ignore[override]
        return cp  # one process, one store: every writer shares the object

    def write_raw(self, cp: MemoryCheckpointer, thread_id: str, step: int, text: str) -> None:  # type: ignore[override]
        rows = cp._rows[thread_id]
        rows[step] = replace(rows[step], text=text)

    # A memory store cannot be shared with another process: the cross-process claim test does not apply.
    test_a_claim_held_by_another_process_is_busy_until_that_process_is_killed = None  # type: ignore[assignment]
