"""A watchdog that kills statements running past their deadline.

``max_statement_time`` (MariaDB) or ``max_execution_time`` (MySQL) stops most runaway queries,
but the agent's session can raise its own limit (``SET SESSION max_statement_time=0``), so an
independent thread sends ``KILL QUERY <id>`` from an admin connection when a deadline passes.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

__all__ = ["QueryWatchdog"]


class QueryWatchdog:
    """Kills server-side statements whose deadline passed.

    ``arm``/``disarm`` are cheap (a lock and a dict operation) so they can bracket every
    statement. The thread polls every ``poll_interval`` seconds, which bounds how late a kill
    can come. A kill is issued while holding the lock, so after ``disarm`` returns no kill for
    that statement can still be in flight.

    Args:
        kill: called with a server connection id; must not raise for vanished connections.
        poll_interval: seconds between deadline checks.
    """

    def __init__(self, kill: Callable[[int], None], *, poll_interval: float = 0.1) -> None:
        self._kill = kill
        self._poll = poll_interval
        self._lock = threading.Lock()
        self._armed: dict[int, tuple[float, int]] = {}
        self._tokens = itertools.count(1)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.kills = 0  # statements killed so far (for tests and diagnostics)

    def arm(self, connection_id: int, seconds: float) -> int:
        """Start watching a statement on ``connection_id``; returns a token for ``disarm``."""
        token = next(self._tokens)
        with self._lock:
            self._armed[token] = (time.monotonic() + seconds, connection_id)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sql-watchdog", daemon=True)
                self._thread.start()
        return token

    def disarm(self, token: int) -> None:
        """Stop watching; idempotent."""
        with self._lock:
            self._armed.pop(token, None)

    def _run(self) -> None:
        while not self._stop.wait(self._poll):
            now = time.monotonic()
            with self._lock:
                due = [(t, cid) for t, (deadline, cid) in self._armed.items() if deadline <= now]
                for token, connection_id in due:
                    del self._armed[token]
                    try:
                        self._kill(connection_id)
                        self.kills += 1
                    except Exception:  # the server may be gone; the step reports that itself
                        pass

    def close(self) -> None:
        """Stop the thread (idempotent)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
