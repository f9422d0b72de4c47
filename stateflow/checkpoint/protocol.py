"""The :class:`Checkpointer` protocol every checkpoint store implements."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from stateflow.checkpoint.record import Checkpoint, ThreadInfo

__all__ = ["Checkpointer"]


@runtime_checkable
class Checkpointer(Protocol):
    """A store of checkpoints, one append-only sequence of steps per thread.

    Implementations: :class:`~stateflow.checkpoint.MemoryCheckpointer` (one process),
    :class:`~stateflow.checkpoint.SQLiteCheckpointer` (one machine, several processes) and
    :class:`~stateflow.checkpoint.PostgresCheckpointer` (several machines). All pass the same
    conformance suite (``tests/core/checkpoint``).
    """

    def put(self, checkpoint: Checkpoint) -> None:
        """Append ``checkpoint`` to its thread.

        ``checkpoint.step`` must be 0 for a new thread, else the latest step + 1: this makes two
        writers of one thread fail loudly instead of writing twice. Atomic: a reader never sees
        half a row.

        Raises:
            CheckpointConflict: the step does not continue the thread (names the step tried and the
                latest stored); nothing is written.
            CheckpointInvalid: the checkpoint cannot be serialized; nothing is written.
        """
        ...

    def latest(self, thread_id: str) -> Checkpoint | None:
        """The thread's newest checkpoint, ``None`` when the thread has none.

        Raises:
            CheckpointCorrupt: the stored row cannot be read (names the thread and step).
        """
        ...

    def get(self, thread_id: str, step: int) -> Checkpoint:
        """The checkpoint at ``step``.

        Raises:
            ThreadNotFound: no such thread.
            CheckpointNotFound: the thread has no such step.
            CheckpointCorrupt: the stored row cannot be read.
        """
        ...

    def list(self, thread_id: str) -> list[Checkpoint]:
        """Every checkpoint of the thread, ascending step.

        Raises:
            ThreadNotFound: no such thread.
            CheckpointCorrupt: a stored row cannot be read.
        """
        ...

    def threads(self) -> list[ThreadInfo]:
        """One line per thread, the most recently updated first (readable even when a thread's
        payload is damaged: it is built from the rows' metadata)."""
        ...

    def claim(self, thread_id: str, owner: str) -> AbstractContextManager[None]:
        """The exclusive right to continue a thread while the context is open.

        Another process or thread claiming it meanwhile gets :class:`~stateflow.errors.ThreadBusy`
        naming the thread and the holder. Released on exit and when the holding process dies (no
        stale locks after ``kill -9``). A claim does not need the thread to exist yet.
        """
        ...

    def close(self) -> None:
        """Release connections and files; the store's contents stay."""
        ...
