"""The in-process checkpointer: for tests, notebooks and runs that need pause/fork but not a crash."""

from __future__ import annotations

import builtins
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from stateflow.checkpoint.payload_text import PayloadText
from stateflow.checkpoint.record import Checkpoint, ThreadInfo, ThreadStatus, load_json_text
from stateflow.errors import CheckpointConflict, CheckpointCorrupt, CheckpointNotFound, ThreadBusy, ThreadNotFound

__all__ = ["MemoryCheckpointer"]


@dataclass(frozen=True)
class _Row:
    """A stored checkpoint: its record fields, kept apart from the payload (as the database stores
    keep columns, so one damaged payload does not hide its thread), and its text.

    ``text`` is the whole record's JSON (a checkpoint that came without its payload's text);
    otherwise ``payload_text`` is the payload's canonical JSON as the run's encoder made it (as
    one string, or in the immutable parts a run's encoder gives, joined when read), and the record
    is assembled from the fields when read. Either way a read decodes text.
    """

    text: str | None
    payload_text: str | PayloadText | None
    flow_name: str
    fingerprint: str
    state: str
    status: ThreadStatus
    created_at: float
    parent: tuple[str, int] | None
    schema_version: int


class MemoryCheckpointer:
    """Checkpoints in this process's memory; thread-safe, gone when the process exits.

    Payloads are kept as their JSON text, as the persistent stores keep them: a caller that
    mutates a payload after ``put`` (or after reading it) cannot change what is stored, a payload
    that is not JSON fails at ``put``, not later in a SQLite run, and every read decodes the text
    afresh, so ``get``/``latest``/``list`` return what a SQLite store returns for the same puts. A
    checkpoint that comes with its text (a run's: the encoder made that text once, in parts) is
    stored as that text plus its validated fields, with no second encoding of the whole record.

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

    def _parse(self, row: _Row, thread_id: str, step: int) -> Checkpoint:
        where = self._where(thread_id, step)
        try:
            if row.text is not None:
                return Checkpoint.from_json(row.text, where=where)
            given = row.payload_text
            payload = load_json_text(given if not isinstance(given, PayloadText) else given.json(), where=where)
            if not isinstance(payload, dict):
                raise CheckpointCorrupt(where, f"payload must be a JSON object, got {type(payload).__name__}")
        except CheckpointCorrupt as err:
            err.thread_id, err.step = thread_id, step
            raise
        # the fields were validated at put, as from_json validates them (same values as its result)
        return Checkpoint(
            thread_id=thread_id,
            step=step,
            flow_name=row.flow_name,
            flow_fingerprint=row.fingerprint,
            state=row.state,
            status=row.status,
            payload=payload,
            created_at=row.created_at,
            parent=row.parent,
            schema_version=row.schema_version,
        )

    def put(self, checkpoint: Checkpoint) -> None:
        """See :meth:`stateflow.checkpoint.Checkpointer.put`."""
        c = checkpoint
        if c.has_text:  # its writer promises it is canonical_json(payload)
            c.check()
            # a run's parts are kept as they are (immutable texts): the join waits for a read
            text, payload_text = None, c.payload_text if c.payload_text is not None else c.payload_json
        else:
            text, payload_text = c.to_json(), None  # validates the fields and encodes the payload
        parent = None if c.parent is None else (c.parent[0], c.parent[1])
        created = float(c.created_at)  # as a reader of the JSON gets it (an int is read back as a float)
        row = _Row(
            text,
            payload_text,
            c.flow_name,
            c.flow_fingerprint,
            c.state,
            ThreadStatus(c.status),
            created,
            parent,
            c.schema_version,
        )
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
            row = rows[-1] if rows else None
            step = len(rows) - 1 if rows else -1
        return None if row is None else self._parse(row, thread_id, step)

    def get(self, thread_id: str, step: int) -> Checkpoint:
        """See :meth:`stateflow.checkpoint.Checkpointer.get`."""
        with self._lock:
            rows = self._rows.get(thread_id)
            if not rows:
                raise ThreadNotFound(thread_id, "memory checkpointer")
            if not 0 <= step < len(rows):
                raise CheckpointNotFound(thread_id, step, len(rows) - 1, "memory checkpointer")
            row = rows[step]
        return self._parse(row, thread_id, step)

    def list(self, thread_id: str) -> builtins.list[Checkpoint]:
        """See :meth:`stateflow.checkpoint.Checkpointer.list`."""
        with self._lock:
            rows = builtins.list(self._rows.get(thread_id, ()))
        if not rows:
            raise ThreadNotFound(thread_id, "memory checkpointer")
        return [self._parse(row, thread_id, i) for i, row in enumerate(rows)]

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
