"""The SQLite checkpointer: one file on this machine, shared by threads and processes, crash-safe."""

from __future__ import annotations

import builtins
import fcntl
import hashlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from stateflow.checkpoint.record import Checkpoint, ThreadInfo, ThreadStatus
from stateflow.errors import CheckpointConflict, CheckpointNotFound, ThreadBusy, ThreadNotFound

__all__ = ["SQLiteCheckpointer"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id     TEXT    NOT NULL,
    step          INTEGER NOT NULL,
    flow_name     TEXT    NOT NULL,
    state         TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    created_at    REAL    NOT NULL,
    parent_thread TEXT,
    parent_step   INTEGER,
    body          TEXT    NOT NULL,   -- Checkpoint.to_json(): the only column a reader trusts for content
    PRIMARY KEY (thread_id, step)
) WITHOUT ROWID;
"""

# Columns copied out of the record so that `threads()` and conflict checks never parse a body:
# one damaged body then hides nothing but itself.
_THREADS_SQL = """
SELECT l.thread_id, l.flow_name, l.status, l.state, l.step, f.created_at, l.created_at,
       f.parent_thread, f.parent_step
FROM checkpoints AS l
JOIN (SELECT thread_id, MAX(step) AS top FROM checkpoints GROUP BY thread_id) AS x
  ON l.thread_id = x.thread_id AND l.step = x.top
JOIN checkpoints AS f ON f.thread_id = l.thread_id AND f.step = 0
ORDER BY l.created_at DESC, l.thread_id DESC
"""


class SQLiteCheckpointer:
    """Checkpoints in one SQLite file (write-ahead log), usable from several threads and processes.

    Guarantees:
        - A ``put`` is one transaction (``BEGIN IMMEDIATE``: the step check and the insert see the
          same database), so a reader or a process killed mid-write never leaves half a row, and
          two writers of one step cannot both succeed (the primary key backs the check).
        - ``synchronous=FULL`` by default: a committed checkpoint survives a power loss as well as a
          killed process; ``durable=False`` (``synchronous=NORMAL``) keeps the crash guarantee for
          processes and may lose the last commits on a power loss, for a cheaper ``put``.
        - ``claim`` holds an exclusive ``flock`` on a sidecar file (``<path>.claims/<hash>.lock``):
          the kernel releases it when the holder closes it or dies, so a ``kill -9`` leaves no
          stale claim, with no liveness polling and no pid-reuse ambiguity. ``flock`` locks belong
          to an open file, so two threads of one process exclude each other too. Like SQLite's WAL
          itself, this needs a local file system (not NFS).

    Args:
        path: the database file (created with its tables if missing).
        durable: ``synchronous=FULL`` (default) or ``NORMAL`` (see above).
        timeout: seconds a writer waits for another writer's transaction before failing.

    Example:
        >>> import tempfile
        >>> cp = SQLiteCheckpointer(Path(tempfile.mkdtemp()) / "runs.db")
        >>> cp.put(Checkpoint("t", 0, "demo", "f" * 64, "Init", ThreadStatus.RUNNING, {"n": 1}, 0.0))
        >>> cp.latest("t").state, [i.thread_id for i in cp.threads()]
        ('Init', ['t'])
        >>> cp.close()
    """

    def __init__(self, path: str | os.PathLike[str], *, durable: bool = True, timeout: float = 30.0) -> None:
        self.path = Path(path)
        self._durable = durable
        self._timeout = timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: builtins.list[sqlite3.Connection] = []
        self._claims_dir = self.path.with_name(self.path.name + ".claims")
        self._connect()  # create the schema now: a bad path fails here, not at the first put

    def __repr__(self) -> str:
        return f"SQLiteCheckpointer({str(self.path)!r})"

    def _connect(self) -> sqlite3.Connection:
        """This thread's connection (sqlite3 connections must not be shared between threads)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        # isolation_level=None: transactions are opened explicitly (BEGIN IMMEDIATE in put).
        conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={'FULL' if self._durable else 'NORMAL'}")
        conn.execute(_SCHEMA)
        self._local.conn = conn
        with self._lock:
            self._connections.append(conn)
        return conn

    def _where(self, thread_id: str, step: int) -> str:
        return f"sqlite {self.path}, thread {thread_id!r} step {step}"

    def put(self, checkpoint: Checkpoint) -> None:
        """See :meth:`stateflow.checkpoint.Checkpointer.put`."""
        c = checkpoint
        body = c.to_json()
        parent_thread, parent_step = c.parent if c.parent is not None else (None, None)
        row = (c.thread_id, c.step, c.flow_name, c.state, str(c.status), c.created_at, parent_thread, parent_step, body)
        conn = self._connect()
        conn.execute("BEGIN IMMEDIATE")
        try:
            (latest,) = conn.execute("SELECT MAX(step) FROM checkpoints WHERE thread_id = ?", (c.thread_id,)).fetchone()
            if c.step != (0 if latest is None else latest + 1):
                raise CheckpointConflict(c.thread_id, c.step, latest)
            conn.execute("INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _latest_step(self, conn: sqlite3.Connection, thread_id: str) -> int | None:
        (latest,) = conn.execute("SELECT MAX(step) FROM checkpoints WHERE thread_id = ?", (thread_id,)).fetchone()
        return latest

    def latest(self, thread_id: str) -> Checkpoint | None:
        """See :meth:`stateflow.checkpoint.Checkpointer.latest`."""
        row = (
            self._connect()
            .execute(
                "SELECT step, body FROM checkpoints WHERE thread_id = ? ORDER BY step DESC LIMIT 1",
                (thread_id,),
            )
            .fetchone()
        )
        return None if row is None else Checkpoint.from_json(row[1], where=self._where(thread_id, row[0]))

    def get(self, thread_id: str, step: int) -> Checkpoint:
        """See :meth:`stateflow.checkpoint.Checkpointer.get`."""
        conn = self._connect()
        query = "SELECT body FROM checkpoints WHERE thread_id = ? AND step = ?"
        row = conn.execute(query, (thread_id, step)).fetchone()
        if row is None:
            latest = self._latest_step(conn, thread_id)
            if latest is None:
                raise ThreadNotFound(thread_id, f"sqlite {self.path}")
            raise CheckpointNotFound(thread_id, step, latest, f"sqlite {self.path}")
        return Checkpoint.from_json(row[0], where=self._where(thread_id, step))

    def list(self, thread_id: str) -> builtins.list[Checkpoint]:
        """See :meth:`stateflow.checkpoint.Checkpointer.list`."""
        rows = (
            self._connect()
            .execute("SELECT step, body FROM checkpoints WHERE thread_id = ? ORDER BY step", (thread_id,))
            .fetchall()
        )
        if not rows:
            raise ThreadNotFound(thread_id, f"sqlite {self.path}")
        return [Checkpoint.from_json(body, where=self._where(thread_id, step)) for step, body in rows]

    def threads(self) -> builtins.list[ThreadInfo]:
        """See :meth:`stateflow.checkpoint.Checkpointer.threads`."""
        return [
            ThreadInfo(
                thread_id=tid,
                flow_name=flow,
                status=ThreadStatus(status),
                state=state,
                step=step,
                created_at=created,
                updated_at=updated,
                parent=None if p_thread is None else (p_thread, p_step),
            )
            for tid, flow, status, state, step, created, updated, p_thread, p_step in self._connect().execute(
                _THREADS_SQL
            )
        ]

    @contextmanager
    def claim(self, thread_id: str, owner: str) -> Iterator[None]:
        """See :meth:`stateflow.checkpoint.Checkpointer.claim` (a ``flock`` on a sidecar file)."""
        self._claims_dir.mkdir(exist_ok=True)
        # Hashed name: a thread id may hold any character, a file name may not.
        name = hashlib.sha256(thread_id.encode("utf-8")).hexdigest()[:32] + ".lock"
        fd = os.open(self._claims_dir / name, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or None
                raise ThreadBusy(thread_id, holder) from None
            # Who holds it, for the other side's message (the lock, not this text, is the claim).
            note = f"{owner} (pid {os.getpid()}, host {os.uname().nodename})".encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, note, 0)
            try:
                yield
            finally:
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Close every connection this object opened (from any thread); the file stays."""
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
        self._local = threading.local()
