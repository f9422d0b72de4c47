"""The in-process checkpointer: for tests, notebooks and runs that need pause/fork but not a crash."""

from __future__ import annotations

import builtins
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from stateflow.checkpoint.record import Checkpoint, ThreadInfo, ThreadStatus
from stateflow.errors import CheckpointConflict, CheckpointCorrupt, CheckpointNotFound, ThreadBusy, ThreadNotFound

__all__ = ["MemoryCheckpointer"]


@dataclass(frozen=True)
class _Row:
    """A stored checkpoint: its text plus the metadata ``threads()`` lists (kept apart from the
    text, as the database stores keep columns, so one damaged payload does not hide its thread)."""

    text: str
    flow_name: str
    state: str
    status: ThreadStatus
    created_at: float
    parent: tuple[str, int] | None


class MemoryCheckpointer:
    """Checkpoints in this process's memory; thread-safe, gone when the process exits.

    Rows are kept as their JSON text, exactly as the persistent stores keep them: a caller that
    mutates a payload after ``put`` (or after reading it) cannot change what is stored, and a
    payload that is not JSON fails at ``put``, not later in a SQLite run.

    Example:
        >>> from stateflow.checkpoint import ThreadStatus
        >>> cp = MemoryCheckpointer()
        >>> cp.put(Checkpoint("t", 0, "demo", "f" * 64, "Init", ThreadStatus.RUNNING, {"n": 1}, 0.0))
        >>> cp.latest("t").payload
        {'n': 1}
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, builtins.list[_Row]] = {}
        self._claims: dict[str, str] = {}

    def _where(self, thread_id: str, step: int) -> str:
        return f"memory checkpointer, thread {thread_id!r} step {step}"

    def _parse(self, text: str, thread_id: str, step: int) -> Checkpoint:
        try:
            return Checkpoint.from_json(text, where=self._where(thread_id, step))
        except CheckpointCorrupt as err:
            err.thread_id, err.step = thread_id, step
            raise

    def put(self, checkpoint: Checkpoint) -> None:
        """See :meth:`stateflow.checkpoint.Checkpointer.put`."""
        c = checkpoint
        row = _Row(c.to_json(), c.flow_name, c.state, c.status, c.created_at, c.parent)
        with self._lock:
            rows = self._rows.get(checkpoint.thread_id)
            latest = None if not rows else len(rows) - 1
            expected = 0 if latest is None else latest + 1
            if checkpoint.step != expected:
                raise CheckpointConflict(checkpoint.thread_id, checkpoint.step, latest)
            self._rows.setdefault(checkpoint.thread_id, []).append(row)

    def latest(self, thread_id: str) -> Checkpoint | None:
        """See :meth:`stateflow.checkpoint.Checkpointer.latest`."""
        with self._lock:
            rows = self._rows.get(thread_id)
            text = rows[-1].text if rows else None
            step = len(rows) - 1 if rows else -1
        return None if text is None else self._parse(text, thread_id, step)

    def get(self, thread_id: str, step: int) -> Checkpoint:
        """See :meth:`stateflow.checkpoint.Checkpointer.get`."""
        with self._lock:
            rows = self._rows.get(thread_id)
            if not rows:
                raise ThreadNotFound(thread_id, "memory checkpointer")
            if not 0 <= step < len(rows):
                raise CheckpointNotFound(thread_id, step, len(rows) - 1, "memory checkpointer")
            text = rows[step].text
        return self._parse(text, thread_id, step)

    def list(self, thread_id: str) -> builtins.list[Checkpoint]:
        """See :meth:`stateflow.checkpoint.Checkpointer.list`."""
        with self._lock:
            rows = builtins.list(self._rows.get(thread_id, ()))
        if not rows:
            raise ThreadNotFound(thread_id, "memory checkpointer")
        return [self._parse(row.text, thread_id, i) for i, row in enumerate(rows)]

    def threads(self) -> builtins.list[ThreadInfo]:
        """See :meth:`stateflow.checkpoint.Checkpointer.threads`."""
        with self._lock:
            infos = [
                ThreadInfo(
                    thread_id=thread_id,
                    flow_name=rows[-1].flow_name,
                    status=rows[-1].status,
                    state=rows[-1].state,
                    step=len(rows) - 1,
                    created_at=rows[0].created_at,
                    updated_at=rows[-1].created_at,
                    parent=rows[0].parent,
                )
                for thread_id, rows in self._rows.items()
                if rows
            ]
        return sorted(infos, key=lambda i: (i.updated_at, i.thread_id), reverse=True)

    @contextmanager
    def claim(self, thread_id: str, owner: str) -> Iterator[None]:
        """See :meth:`stateflow.checkpoint.Checkpointer.claim` (exclusive among this process's threads)."""
        holder = f"{owner} (pid {os.getpid()}, thread {threading.get_ident()})"
        with self._lock:
            if thread_id in self._claims:
                raise ThreadBusy(thread_id, self._claims[thread_id])
            self._claims[thread_id] = holder
        try:
            yield
        finally:
            with self._lock:
                self._claims.pop(thread_id, None)

    def close(self) -> None:
        """Nothing to release; the checkpoints stay readable until the object is dropped."""
