"""What both protocols of ``stateflow serve`` share about threads: a refusal with its HTTP
status and reason, and one lock per thread so requests for it are served one at a time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["Refused", "ThreadLocks"]


class Refused(Exception):
    """A request that cannot be served: its HTTP status and the reason."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


class ThreadLocks:
    """One asyncio lock per thread id while requests for it are in flight (then dropped)."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, thread_id: str) -> AsyncIterator[None]:
        """Hold ``thread_id``'s lock (waiting for the requests before this one)."""
        lock, users = self._locks.get(thread_id, (asyncio.Lock(), 0))
        self._locks[thread_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[thread_id]
            if users == 1:
                del self._locks[thread_id]
            else:
                self._locks[thread_id] = (lock, users - 1)
