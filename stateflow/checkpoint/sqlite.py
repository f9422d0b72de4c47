"""The SQLite checkpointer: one file on this machine, shared by threads and processes, crash-safe."""

from __future__ import annotations

import builtins
import fcntl
import functools
import hashlib
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar
from urllib.parse import quote

from stateflow.checkpoint.record import Checkpoint, ThreadInfo, ThreadStatus
from stateflow.checkpoint.rows import DEFAULT_SNAPSHOT_EVERY, PayloadCache, decode_rows, encode_row, window_start
from stateflow.errors import (
    CheckpointConflict,
    CheckpointCorrupt,
    CheckpointNotFound,
    CheckpointStoreUnavailable,
    ThreadBusy,
    ThreadNotFound,
)

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
    body          TEXT    NOT NULL,   -- a full record or a delta (stateflow/checkpoint/rows.py)
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


# A row inserted only if it is its thread's next step (one statement: its own write transaction)
_INSERT_NEXT = """
INSERT INTO checkpoints
SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?
WHERE (SELECT COALESCE(MAX(step) + 1, 0) FROM checkpoints WHERE thread_id = ?) = ?
"""

_SYNC_POLICIES = ("pauses", "status", "full", "normal")
"""``SQLiteCheckpointer(sync=...)``: which commits are fsynced (see the class docstring)."""

P = ParamSpec("P")
R = TypeVar("R")


def _store_errors(method: Callable[P, R]) -> Callable[P, R]:
    """SQLite's own failures (locked past the timeout, disk full, not a database, unopenable
    path) become CheckpointStoreUnavailable naming the file; checkpoint errors pass through."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except sqlite3.IntegrityError:
            raise  # a broken invariant, not an unavailable store: never expected (put checks first)
        except sqlite3.DatabaseError as err:
            self = args[0]
            raise CheckpointStoreUnavailable(f"sqlite {self.path}", str(err)) from err  # type: ignore[attr-defined]

    return wrapper


class _Held:
    """A thread's connection and its current ``synchronous`` level, kept in a thread-local: when
    the thread ends its local values are dropped and a finalizer closes the connection."""

    __slots__ = ("__weakref__", "conn", "level")

    def __init__(self, conn: sqlite3.Connection, level: str):
        self.conn, self.level = conn, level


def _forget(conn: sqlite3.Connection, connections: dict[int, sqlite3.Connection]) -> None:
    """Close a connection whose thread ended (no lock: a finalizer may run under any lock;
    ``dict.pop`` is atomic, and closing a closed connection does nothing)."""
    connections.pop(id(conn), None)
    conn.close()


class SQLiteCheckpointer:
    """Checkpoints in one SQLite file (write-ahead log), usable from several threads and processes.

    Guarantees:
        - A ``put`` is one transaction (``BEGIN IMMEDIATE``: the step check and the insert see the
          same database), so a reader or a process killed mid-write never leaves half a row, and
          two writers of one step cannot both succeed (the primary key backs the check).
        - Every committed checkpoint survives a killed process (``kill -9``: the write-ahead log
          is in the operating system's hands once ``COMMIT`` returns). What survives a *power
          loss* (or a kernel crash) is chosen by ``sync``:

          - ``"pauses"`` (default): a checkpoint that pauses its thread for a person's answer
            is committed with ``synchronous=FULL`` (fsync of the log), which also makes every
            earlier checkpoint of the file durable; every other checkpoint uses
            ``synchronous=NORMAL`` and may be lost on a power loss, back to the last fsync or
            automatic WAL checkpoint. A resume then re-runs those transitions (their model calls
            are asked again); a paused thread waiting days for a person is never lost. A run
            that never pauses costs what ``"normal"`` costs.
          - ``"status"``: the same for every checkpoint that changes where a thread stands
            (``paused``, ``finished``, ``failed``): also a finished or failed thread survives a
            power loss, at one fsync per run (about 6 ms on the test machine's disk: 5 % of a
            120 ms fake-model episode, nothing next to a real model's).
          - ``"full"``: every checkpoint fsynced; ``"normal"``: none (power loss may lose any
            checkpoint since the last automatic WAL checkpoint, never corrupt the file).
        - Rows store the changes since the previous step, with a full row every ``snapshot_every``
          steps (``stateflow.checkpoint.rows``); reads always return full payloads.
        - ``claim`` holds an exclusive ``flock`` on a sidecar file (``<path>.claims/<hash>.lock``):
          the kernel releases it when the holder closes it or dies, so a ``kill -9`` leaves no
          stale claim, with no liveness polling and no pid-reuse ambiguity. ``flock`` locks belong
          to an open file, so two threads of one process exclude each other too. The file is
          removed when its claim ends (by its holder, under the lock: safe against a concurrent
          claimer, see ``_locked``), so the folder does not grow with every thread ever run. Like
          SQLite's WAL itself, this needs a local file system (not NFS).

    Args:
        path: the database file (created with its tables if missing).
        sync: ``"pauses"`` (default), ``"status"``, ``"full"`` or ``"normal"`` (see above).
        durable: the former switch, kept for callers: ``True`` is ``sync="full"``, ``False`` is
            ``sync="normal"``; ``None`` (default) leaves ``sync`` in charge.
        timeout: seconds a writer waits for another writer's transaction before failing.
        snapshot_every: a full row every this many steps (1: every row full, no deltas).

    Example:
        >>> import tempfile
        >>> cp = SQLiteCheckpointer(Path(tempfile.mkdtemp()) / "runs.db")
        >>> cp.put(Checkpoint("t", 0, "demo", "f" * 64, "Init", ThreadStatus.RUNNING, {"n": 1}, 0.0))
        >>> cp.latest("t").state, [i.thread_id for i in cp.threads()]
        ('Init', ['t'])
        >>> cp.close()
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        sync: str = "pauses",
        durable: bool | None = None,
        timeout: float = 30.0,
        snapshot_every: int = DEFAULT_SNAPSHOT_EVERY,
    ) -> None:
        if snapshot_every < 1:
            raise ValueError(f"snapshot_every must be >= 1, got {snapshot_every}")
        if durable is not None:
            sync = "full" if durable else "normal"
        if sync not in _SYNC_POLICIES:
            raise ValueError(f"sync must be one of {', '.join(_SYNC_POLICIES)}, got {sync!r}")
        self.sync = sync
        self.path = Path(path)
        self.snapshot_every = snapshot_every
        self._cache = PayloadCache()
        self._timeout = timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: dict[int, sqlite3.Connection] = {}  # open ones, by id (see _Held)
        self._claims_dir = self.path.with_name(self.path.name + ".claims")
        self.read_only = False  # set when the file can only be read (see _connect_read_only)
        try:
            self._connect()  # create the schema now: a bad path fails here, not at the first put
        except sqlite3.DatabaseError as err:
            raise CheckpointStoreUnavailable(f"sqlite {self.path}", str(err)) from err

    def __repr__(self) -> str:
        return f"SQLiteCheckpointer({str(self.path)!r})"

    def _connect(self) -> sqlite3.Connection:
        """This thread's connection (sqlite3 connections must not be shared between threads)."""
        held: _Held | None = getattr(self._local, "held", None)
        if held is not None:
            return held.conn
        # isolation_level=None: transactions are opened explicitly (BEGIN IMMEDIATE in put).
        conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
        level = "FULL" if self.sync == "full" else "NORMAL"
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={level}")
            conn.execute(_SCHEMA)
        except sqlite3.OperationalError:
            conn.close()
            if not self.path.is_file():
                raise
            conn = self._connect_read_only()  # e.g. a store on a read-only disk: it can still be listed
        held = _Held(conn, level)
        self._local.held = held
        connections = self._connections
        connections[id(conn)] = conn
        # Closed when its thread ends (the thread's local values are dropped then): a server runs
        # each streamed run on a new thread, and kept connections held descriptors and memory.
        weakref.finalize(held, _forget, conn, connections)
        return conn

    def _connect_read_only(self) -> sqlite3.Connection:
        """A read-only connection to an existing file this process cannot write.

        ``mode=ro`` needs the write-ahead log's index file (``-shm``) to exist or be creatable;
        in a read-only folder it is neither, and only ``immutable=1`` opens the file. That
        skips locking, which is safe only because nobody can write there either. Any write
        then fails as SQLite's "readonly database", named by :func:`_store_errors`.
        """
        uri = f"file:{quote(str(self.path.resolve()))}"
        try:
            conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
            conn.execute("SELECT 1 FROM checkpoints LIMIT 1")
        except sqlite3.OperationalError:
            conn = sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None, check_same_thread=False)
            conn.execute("SELECT 1 FROM checkpoints LIMIT 1")
        self.read_only = True
        return conn

    def _where(self, thread_id: str, step: int) -> str:
        return f"sqlite {self.path}, thread {thread_id!r} step {step}"

    @_store_errors
    def put(self, checkpoint: Checkpoint) -> None:
        """See :meth:`stateflow.checkpoint.Checkpointer.put`."""
        c = checkpoint
        parent_thread, parent_step = c.parent if c.parent is not None else (None, None)
        conn = self._connect()
        if self.sync in ("pauses", "status"):
            # PRAGMA synchronous applies to the connection's next commits; it cannot change
            # inside a transaction, so it is set before BEGIN (and only when it changes).
            synced = c.status is ThreadStatus.PAUSED or (self.sync == "status" and c.status is not ThreadStatus.RUNNING)
            level = "FULL" if synced else "NORMAL"
            held = self._local.held
            if held.level != level:
                conn.execute(f"PRAGMA synchronous={level}")
                held.level = level
        if self._put_next(conn, c):
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            latest = self._latest_step(conn, c.thread_id)
            if c.step != (0 if latest is None else latest + 1):
                raise CheckpointConflict(c.thread_id, c.step, latest)
            body, payload = encode_row(c, lambda: self._base(conn, c), self.snapshot_every, self._given(c))
            row = (c.thread_id, c.step, c.flow_name, c.state, str(c.status), c.created_at, parent_thread, parent_step)
            conn.execute("INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (*row, body))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        with self._lock:
            self._cache.remember(c.thread_id, c.step, payload, c.payload if c.has_text else None)

    def _put_next(self, conn: sqlite3.Connection, c: Checkpoint) -> bool:
        """A run's next step in one statement, when this writer put the step before with its text
        (the common case: a delta by identity, from the writer's own cache); False leaves the
        checkpoint to the transaction in :meth:`put`.

        The insert happens only if the thread's latest step is the one before (checked inside the
        statement, which SQLite runs as one write transaction), so it is as exact as ``put``'s
        ``BEGIN IMMEDIATE`` ... ``COMMIT`` at a quarter of the statements.
        """
        if c.step == 0 or c.step % self.snapshot_every == 0 or not c.has_text:
            return False
        given = self._given(c)
        if given is None:
            return False
        body, payload = encode_row(c, lambda: self._base(conn, c), self.snapshot_every, given)
        parent_thread, parent_step = c.parent if c.parent is not None else (None, None)
        row = (c.thread_id, c.step, c.flow_name, c.state, str(c.status), c.created_at, parent_thread, parent_step)
        if conn.execute(_INSERT_NEXT, (*row, body, c.thread_id, c.step)).rowcount != 1:
            raise CheckpointConflict(c.thread_id, c.step, self._latest_step(conn, c.thread_id))
        with self._lock:
            self._cache.remember(c.thread_id, c.step, payload, c.payload)
        return True

    def _given(self, checkpoint: Checkpoint) -> Any:
        """The payload object this writer put at the previous step with its text, and that step's
        stored payload (a delta by identity, see :func:`encode_row`)."""
        with self._lock:
            return self._cache.given(checkpoint.thread_id, checkpoint.step - 1)

    def _base(self, conn: sqlite3.Connection, checkpoint: Checkpoint) -> dict[str, Any] | None:
        """The payload of the step before ``checkpoint`` (``None``: write it full)."""
        if checkpoint.step == 0 or checkpoint.step % self.snapshot_every == 0:
            return None
        with self._lock:
            cached = self._cache.get(checkpoint.thread_id, checkpoint.step - 1)
        if cached is not None:
            return cached
        try:
            self._read(conn, checkpoint.thread_id, checkpoint.step - 1)  # caches its payload
        except CheckpointCorrupt:
            return None  # an unreadable base: this row starts afresh, full
        with self._lock:
            return self._cache.get(checkpoint.thread_id, checkpoint.step - 1)

    def _latest_step(self, conn: sqlite3.Connection, thread_id: str) -> int | None:
        (latest,) = conn.execute("SELECT MAX(step) FROM checkpoints WHERE thread_id = ?", (thread_id,)).fetchone()
        return latest

    def _read(self, conn: sqlite3.Connection, thread_id: str, step: int) -> Checkpoint:
        """Decode ``step`` from its window of rows; it must exist."""
        rows = conn.execute(
            "SELECT step, body FROM checkpoints WHERE thread_id = ? AND step BETWEEN ? AND ? ORDER BY step",
            (thread_id, window_start(step, self.snapshot_every), step),
        ).fetchall()
        decoded, payload = decode_rows(rows, thread_id, lambda s: self._where(thread_id, s))
        with self._lock:
            self._cache.remember(thread_id, step, payload)
        return decoded[-1]

    @_store_errors
    def latest(self, thread_id: str) -> Checkpoint | None:
        """See :meth:`stateflow.checkpoint.Checkpointer.latest`."""
        conn = self._connect()
        step = self._latest_step(conn, thread_id)
        return None if step is None else self._read(conn, thread_id, step)

    @_store_errors
    def get(self, thread_id: str, step: int) -> Checkpoint:
        """See :meth:`stateflow.checkpoint.Checkpointer.get`."""
        conn = self._connect()
        latest = self._latest_step(conn, thread_id)
        if latest is None:
            raise ThreadNotFound(thread_id, f"sqlite {self.path}")
        if not 0 <= step <= latest:
            raise CheckpointNotFound(thread_id, step, latest, f"sqlite {self.path}")
        return self._read(conn, thread_id, step)

    @_store_errors
    def list(self, thread_id: str) -> builtins.list[Checkpoint]:
        """See :meth:`stateflow.checkpoint.Checkpointer.list`."""
        rows = (
            self._connect()
            .execute("SELECT step, body FROM checkpoints WHERE thread_id = ? ORDER BY step", (thread_id,))
            .fetchall()
        )
        if not rows:
            raise ThreadNotFound(thread_id, f"sqlite {self.path}")
        return decode_rows(rows, thread_id, lambda s: self._where(thread_id, s), strict=True)[0]

    @_store_errors
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
        """See :meth:`stateflow.checkpoint.Checkpointer.claim` (a ``flock`` on a sidecar file,
        removed again when the claim ends: the folder holds files of claimed threads only)."""
        # Hashed name: a thread id may hold any character, a file name may not.
        path = self._claims_dir / (hashlib.sha256(thread_id.encode("utf-8")).hexdigest()[:32] + ".lock")
        fd = self._locked(path, thread_id)
        try:
            # Who holds it, for the other side's message (the lock, not this text, is the claim).
            note = f"{owner} (pid {os.getpid()}, host {os.uname().nodename})".encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, note, 0)
            try:
                yield
            finally:
                os.ftruncate(fd, 0)
                # Removed while still locked, and only by the lock's holder: see _locked for why no
                # other claimer can be left holding a lock on a file that is no longer the claim.
                path.unlink(missing_ok=True)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _locked(self, path: Path, thread_id: str) -> int:
        """An open descriptor of ``path``, exclusively ``flock``-ed, that is still the file at ``path``.

        Why removing the file at release is safe: the file at ``path`` is only ever unlinked by
        the holder of its lock (above), while holding it. A claimer that opened the file just
        before that unlink gets the lock once it is released, on a file no longer at ``path``;
        it then sees that the path is gone or names another file (another inode) and starts
        over with the file now at ``path`` (created anew if need be). So whoever returns from
        here holds the lock on the one file at ``path``, and two claimers never hold locks on
        two different files for one thread. The check needs the lock first: before it, the
        file could still be unlinked. A file left by a holder that was killed (``kill -9``)
        is not locked by anyone: the next claim of its thread takes it and removes it at the end.

        Raises:
            ThreadBusy: another holder has the lock (its note names it).
        """
        while True:
            try:  # the directory is made by the first claim (or again, if someone removed it)
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:
                self._claims_dir.mkdir(exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or None
                os.close(fd)
                raise ThreadBusy(thread_id, holder) from None
            except BaseException:
                os.close(fd)
                raise
            try:
                current = os.stat(path)
            except FileNotFoundError:
                current = None
            mine = os.fstat(fd)
            if current is not None and (current.st_dev, current.st_ino) == (mine.st_dev, mine.st_ino):
                return fd
            os.close(fd)  # the file was removed by the holder it waited for: claim the path's file anew

    def close(self) -> None:
        """Close every connection this object opened (from any thread); the file stays."""
        connections, self._connections = self._connections, {}
        for conn in list(connections.values()):
            conn.close()
        connections.clear()
        self._local = threading.local()
