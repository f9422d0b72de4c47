"""The PostgreSQL checkpointer: runs shared by several machines (extra ``[postgres]``, psycopg 3)."""

from __future__ import annotations

import builtins
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from stateflow.checkpoint.record import Checkpoint, ThreadInfo, ThreadStatus
from stateflow.checkpoint.rows import DEFAULT_SNAPSHOT_EVERY, PayloadCache, decode_rows, encode_row, window_start
from stateflow.errors import (
    CheckpointConflict,
    CheckpointCorrupt,
    CheckpointNotFound,
    CheckpointStoreUnavailable,
    ClaimLost,
    ConfigError,
    ThreadBusy,
    ThreadNotFound,
    redact_dsn,
    redact_secrets,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresCheckpointer"]

T = TypeVar("T")

# Advisory lock namespaces (the two-int key form; it never overlaps the one-bigint form that
# claims use). 0x5346 = "SF".
_SCHEMA_LOCK = (0x5346, 0)  # serializes CREATE TABLE IF NOT EXISTS between first-time users
_PUT_NS = 0x5346 + 1  # per-thread put serialization: (ns, hashtext(thread_id))

_SCHEMA = """
CREATE TABLE IF NOT EXISTS stateflow_checkpoints (
    thread_id     text             NOT NULL,
    step          integer          NOT NULL,
    flow_name     text             NOT NULL,
    state         text             NOT NULL,
    status        text             NOT NULL,
    created_at    double precision NOT NULL,
    parent_thread text,
    parent_step   integer,
    body          text             NOT NULL,
    PRIMARY KEY (thread_id, step)
);
CREATE TABLE IF NOT EXISTS stateflow_claims (
    thread_id text PRIMARY KEY,
    holder    text NOT NULL,
    since     double precision NOT NULL
);
"""

_THREADS_SQL = """
SELECT l.thread_id, l.flow_name, l.status, l.state, l.step, f.created_at, l.created_at,
       f.parent_thread, f.parent_step
FROM (SELECT DISTINCT ON (thread_id) * FROM stateflow_checkpoints ORDER BY thread_id, step DESC) AS l
JOIN stateflow_checkpoints AS f ON f.thread_id = l.thread_id AND f.step = 0
ORDER BY l.created_at DESC, l.thread_id DESC
"""

# TCP keepalives: a claim held by a machine that vanished (no FIN, no RST) is released once the
# server notices the dead connection, about idle + interval * count = 60 s later.
_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}


class PostgresCheckpointer:
    """Checkpoints in a PostgreSQL database, shared by every process and machine that reaches it.

    Guarantees:
        - A ``put`` is one transaction that first takes a per-thread transaction lock, so the step
          check and the insert are serialized per thread; the primary key backs it.
        - ``claim`` is a session advisory lock (``pg_try_advisory_lock``) on a connection opened for
          the claim and held while it lasts: the server drops the lock with the connection, so a
          killed process (or, through TCP keepalives, a vanished machine) leaves no stale claim. The
          holder's name is written to ``stateflow_claims`` for the other side's message only.
        - Rows store the changes since the previous step, with a full row every ``snapshot_every``
          steps (``stateflow.checkpoint.rows``); reads always return full payloads.
        - A claim is checked before every ``put`` of its thread by this object: its connection
          must still be alive and its session still hold the advisory lock (one round trip on
          the claim's connection). A claim lost under a run (a server restart, a dropped
          connection, ``pg_terminate_backend``) raises :class:`~stateflow.errors.ClaimLost`
          before anything is written, so a run never goes on writing a thread that another
          process may have claimed meanwhile; its earlier checkpoints stay readable.
        - A server that goes away raises :class:`~stateflow.errors.CheckpointStoreUnavailable`
          (naming the DSN without its password); committed checkpoints stay, and the next call
          reconnects.

    Args:
        dsn: a libpq connection string or URL (``postgresql://user@host/db``, ``host=/run/pg dbname=x``).
        connect_timeout: seconds to wait for the server on each (re)connection.
        snapshot_every: a full row every this many steps (1: every row full, no deltas).

    Raises:
        ConfigError: psycopg is not installed (``pip install 'stateflow[postgres]'``).
        CheckpointStoreUnavailable: the server cannot be reached.
    """

    def __init__(
        self, dsn: str, *, connect_timeout: float = 10.0, snapshot_every: int = DEFAULT_SNAPSHOT_EVERY
    ) -> None:
        if snapshot_every < 1:
            raise ValueError(f"snapshot_every must be >= 1, got {snapshot_every}")
        self.snapshot_every = snapshot_every
        self._cache = PayloadCache()
        try:
            import psycopg
        except ImportError as err:
            raise ConfigError("PostgresCheckpointer needs psycopg 3: pip install 'stateflow[postgres]'") from err
        self._psycopg = psycopg
        try:  # a malformed address is a user's typo, not an unreachable server: say so, without the password
            psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as err:
            raise ConfigError(
                f"checkpoint store {redact_dsn(dsn)}: not a valid PostgreSQL address "
                f"({redact_secrets(_first_line(err).replace(dsn, redact_dsn(dsn)))}); "
                "expected postgresql://USER@HOST[:PORT]/DATABASE"
            ) from None
        self.dsn = dsn
        self._connect_timeout = connect_timeout
        self._lock = threading.RLock()  # one connection, used by one thread at a time
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        self._claims: dict[str, _Claim] = {}  # the claims this object holds, by thread
        self._run(self._create_schema)

    def __repr__(self) -> str:
        return f"PostgresCheckpointer({redact_dsn(self.dsn)!r})"

    # -- connection handling ----------------------------------------------------------------

    def _open(self) -> psycopg.Connection[Any]:
        return self._psycopg.connect(
            self.dsn, autocommit=True, connect_timeout=max(1, round(self._connect_timeout)), **_KEEPALIVES
        )

    def _connection(self) -> psycopg.Connection[Any]:
        if self._closed:
            raise ValueError(f"{self!r} is closed")
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = self._open()
        return self._conn

    def _run(self, action: Callable[[psycopg.Connection[Any]], T], *, read: bool = False) -> T:
        """``action(connection)`` under the lock; a lost server becomes CheckpointStoreUnavailable.

        ``read``: the action only reads, so when it fails on a connection opened before the
        server restarted (psycopg learns that a connection is dead only by using it) it is run
        once more on a new connection. Writes are never repeated: whether a commit that failed
        that way took effect is unknown, and the step check decides on the caller's next put.
        """
        with self._lock:
            stale = self._conn is not None and not self._conn.closed
            try:
                return action(self._connection())
            except self._psycopg.OperationalError as err:
                lost = self._conn is not None and (self._conn.broken or self._conn.closed)
                if lost and self._conn is not None:
                    self._conn.close()
                    self._conn = None
                if not (read and stale and lost):
                    raise CheckpointStoreUnavailable(self.dsn, _first_line(err)) from err
            try:
                return action(self._connection())
            except self._psycopg.OperationalError as err:
                if self._conn is not None and (self._conn.broken or self._conn.closed):
                    self._conn.close()
                    self._conn = None
                raise CheckpointStoreUnavailable(self.dsn, _first_line(err)) from err

    def _create_schema(self, conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", _SCHEMA_LOCK)
            conn.execute(_SCHEMA)

    def _where(self, thread_id: str, step: int) -> str:
        return f"postgres {redact_dsn(self.dsn)}, thread {thread_id!r} step {step}"

    # -- the protocol -----------------------------------------------------------------------

    def put(self, checkpoint: Checkpoint) -> None:
        """See :meth:`stateflow.checkpoint.Checkpointer.put`.

        Raises:
            ClaimLost: this object claimed the thread and the claim has ended (nothing written).
        """
        c = checkpoint
        self._check_claim(c.thread_id)
        parent_thread, parent_step = c.parent if c.parent is not None else (None, None)
        row = (c.thread_id, c.step, c.flow_name, c.state, str(c.status), c.created_at, parent_thread, parent_step)

        def write(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_PUT_NS, c.thread_id))
                latest = self._latest_step(conn, c.thread_id)
                if c.step != (0 if latest is None else latest + 1):
                    raise CheckpointConflict(c.thread_id, c.step, latest)
                body, payload = encode_row(
                    c, lambda: self._base(conn, c), self.snapshot_every, self._cache.given(c.thread_id, c.step - 1)
                )
                conn.execute(
                    "INSERT INTO stateflow_checkpoints VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", (*row, body)
                )
            given = c.payload if c.has_text else None  # see encode_row
            self._cache.remember(c.thread_id, c.step, payload, given)  # after the commit, under the lock

        self._run(write)

    def _base(self, conn: psycopg.Connection[Any], checkpoint: Checkpoint) -> dict[str, Any] | None:
        """The payload of the step before ``checkpoint`` (``None``: write it full)."""
        if checkpoint.step == 0 or checkpoint.step % self.snapshot_every == 0:
            return None
        cached = self._cache.get(checkpoint.thread_id, checkpoint.step - 1)
        if cached is not None:
            return cached
        try:
            self._read(conn, checkpoint.thread_id, checkpoint.step - 1)  # caches its payload
        except CheckpointCorrupt:
            return None  # an unreadable base: this row starts afresh, full
        return self._cache.get(checkpoint.thread_id, checkpoint.step - 1)

    def _check_claim(self, thread_id: str) -> None:
        """Raise ClaimLost if this object's claim on ``thread_id`` has ended; no claim, no check."""
        with self._lock:
            held = self._claims.get(thread_id)
        if held is None:
            return
        try:
            row = held.conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() "
                "AND granted AND classid = %s AND objid = %s AND objsubid = 1",
                (held.classid, held.objid),
            ).fetchone()
        except self._psycopg.Error as err:
            raise ClaimLost(thread_id, held.holder, f"postgres {redact_dsn(self.dsn)}", _first_line(err)) from err
        if not (row and row[0]):
            raise ClaimLost(
                thread_id, held.holder, f"postgres {redact_dsn(self.dsn)}", "its session no longer holds the lock"
            )

    @staticmethod
    def _latest_step(conn: psycopg.Connection[Any], thread_id: str) -> int | None:
        row = conn.execute("SELECT MAX(step) FROM stateflow_checkpoints WHERE thread_id = %s", (thread_id,)).fetchone()
        return None if row is None else row[0]

    def _read(self, conn: psycopg.Connection[Any], thread_id: str, step: int) -> Checkpoint:
        """Decode ``step`` (which exists) from its window of rows; called under the lock."""
        rows = conn.execute(
            "SELECT step, body FROM stateflow_checkpoints "
            "WHERE thread_id = %s AND step BETWEEN %s AND %s ORDER BY step",
            (thread_id, window_start(step, self.snapshot_every), step),
        ).fetchall()
        decoded, payload = decode_rows(rows, thread_id, lambda s: self._where(thread_id, s))
        self._cache.remember(thread_id, step, payload)
        return decoded[-1]

    def latest(self, thread_id: str) -> Checkpoint | None:
        """See :meth:`stateflow.checkpoint.Checkpointer.latest`."""

        def read(conn: psycopg.Connection[Any]) -> Checkpoint | None:
            step = self._latest_step(conn, thread_id)
            return None if step is None else self._read(conn, thread_id, step)

        return self._run(read, read=True)

    def get(self, thread_id: str, step: int) -> Checkpoint:
        """See :meth:`stateflow.checkpoint.Checkpointer.get`."""

        def read(conn: psycopg.Connection[Any]) -> Checkpoint:
            latest = self._latest_step(conn, thread_id)
            if latest is None:
                raise ThreadNotFound(thread_id, f"postgres {redact_dsn(self.dsn)}")
            if not 0 <= step <= latest:
                raise CheckpointNotFound(thread_id, step, latest, f"postgres {redact_dsn(self.dsn)}")
            return self._read(conn, thread_id, step)

        return self._run(read, read=True)

    def list(self, thread_id: str) -> builtins.list[Checkpoint]:
        """See :meth:`stateflow.checkpoint.Checkpointer.list`."""
        rows = self._run(
            lambda conn: conn.execute(
                "SELECT step, body FROM stateflow_checkpoints WHERE thread_id = %s ORDER BY step", (thread_id,)
            ).fetchall(),
            read=True,
        )
        if not rows:
            raise ThreadNotFound(thread_id, f"postgres {redact_dsn(self.dsn)}")
        return decode_rows(rows, thread_id, lambda s: self._where(thread_id, s), strict=True)[0]

    def threads(self) -> builtins.list[ThreadInfo]:
        """See :meth:`stateflow.checkpoint.Checkpointer.threads`."""
        rows = self._run(lambda conn: conn.execute(_THREADS_SQL).fetchall(), read=True)
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
            for tid, flow, status, state, step, created, updated, p_thread, p_step in rows
        ]

    @contextmanager
    def claim(self, thread_id: str, owner: str) -> Iterator[None]:
        """See :meth:`stateflow.checkpoint.Checkpointer.claim` (an advisory lock on its own connection)."""
        holder = f"{owner} (pid {os.getpid()}, host {os.uname().nodename})"
        try:
            conn = self._open()
        except self._psycopg.OperationalError as err:
            raise CheckpointStoreUnavailable(self.dsn, _first_line(err)) from err
        try:
            try:
                got = conn.execute(
                    "SELECT pg_try_advisory_lock(k), k FROM (SELECT hashtextextended(%s, 0) AS k) AS key",
                    (thread_id,),
                ).fetchone()
                if not (got and got[0]):
                    row = conn.execute(
                        "SELECT holder FROM stateflow_claims WHERE thread_id = %s", (thread_id,)
                    ).fetchone()
                    raise ThreadBusy(thread_id, row[0] if row else None)
                conn.execute(
                    "INSERT INTO stateflow_claims VALUES (%s, %s, %s) "
                    "ON CONFLICT (thread_id) DO UPDATE SET holder = EXCLUDED.holder, since = EXCLUDED.since",
                    (thread_id, holder, time.time()),
                )
            except self._psycopg.OperationalError as err:
                raise CheckpointStoreUnavailable(self.dsn, _first_line(err)) from err
            key = got[1] & 0xFFFFFFFFFFFFFFFF  # pg_locks shows a bigint key as two unsigned halves
            with self._lock:
                self._claims[thread_id] = _Claim(conn, holder, key >> 32, key & 0xFFFFFFFF)
            try:
                yield
            finally:
                with self._lock:
                    self._claims.pop(thread_id, None)
                if not conn.broken:
                    # Best effort: closing the connection below releases the lock anyway, but only once
                    # the server has ended the session (after close() returns: a claim right after this
                    # one could still find it held), so it is released here first, synchronously.
                    with suppress(self._psycopg.Error):
                        conn.execute(
                            "DELETE FROM stateflow_claims WHERE thread_id = %s AND holder = %s", (thread_id, holder)
                        )
                        conn.execute("SELECT pg_advisory_unlock(%s)", (got[1],))
        finally:
            conn.close()

    def close(self) -> None:
        """Close the connection; the database's contents stay."""
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None


@dataclass(frozen=True)
class _Claim:
    """A claim this object holds: the connection whose session holds the lock, and the lock's key
    as ``pg_locks`` shows it."""

    conn: Any
    holder: str
    classid: int
    objid: int


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]
