"""One ``httpx`` transport made of several connection pools: :class:`ShardedTransport`.

Why: httpcore 1.0.9's ``ConnectionPool`` does work that grows with the number of connections it
holds every time a request enters or leaves it, under the pool's lock. For each idle connection
it counts every connection again (quadratic), and it polls every idle connection's socket. With 50
runs awaited together (50 connections to one model endpoint) that was about 1.2 to 1.4 ms of CPU
per model call, under the interpreter lock, measured with ``scripts/bench_live.py`` and a
sampling profiler (py-spy ``--gil``): 40 % of a run's CPU. With one connection it is nothing.
The fix has been proposed upstream (httpcore pull request 1035) but is not released. Splitting
the same connections over a few pools keeps that work small without touching httpcore.

What stays the same: the limits. A request goes to the pool with the most free connections, so
no request waits for a connection while another pool has one free, and the pools together hold
at most ``max_connections`` (as many kept alive), as one pool of that size would.

Example:
    >>> import httpx
    >>> transport = ShardedTransport(max_connections=64, shards=8)
    >>> transport.capacities
    (8, 8, 8, 8, 8, 8, 8, 8)
    >>> with httpx.Client(transport=transport) as client:
    ...     pass
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx

__all__ = ["ShardedTransport"]


class _ReleasingStream(httpx.SyncByteStream):
    """A response body that gives its pool's slot back once, when it is closed (the connection is
    held until then, also by a streamed reply)."""

    def __init__(self, stream: httpx.SyncByteStream, release: Any):
        self._stream = stream
        self._release = release

    def __iter__(self) -> Iterator[bytes]:
        yield from self._stream

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


class ShardedTransport(httpx.BaseTransport):
    """``shards`` ``httpx.HTTPTransport`` s sharing ``max_connections``; thread-safe.

    Args:
        max_connections: connections over all pools (each pool keeps all of its own alive).
        shards: how many pools (at most ``max_connections``).
        **transport_options: passed to each ``httpx.HTTPTransport`` (not ``limits``).

    Raises:
        ValueError: ``max_connections`` or ``shards`` is below 1.
    """

    def __init__(self, *, max_connections: int, shards: int = 8, **transport_options: Any):
        if max_connections < 1 or shards < 1:
            raise ValueError(f"ShardedTransport needs max_connections and shards >= 1, got {max_connections}, {shards}")
        shards = min(shards, max_connections)
        base, extra = divmod(max_connections, shards)
        self.capacities = tuple(base + (1 if i < extra else 0) for i in range(shards))
        self._pools = [
            httpx.HTTPTransport(
                limits=httpx.Limits(max_connections=c, max_keepalive_connections=c), **transport_options
            )
            for c in self.capacities
        ]
        self._busy = [0] * shards  # requests each pool holds a connection (or a queue place) for
        self._lock = threading.Lock()

    def in_flight(self) -> tuple[int, ...]:
        """Requests each pool serves now (their reply bodies not closed yet)."""
        with self._lock:
            return tuple(self._busy)

    def _take(self) -> int:
        with self._lock:
            # The most free connections; when every pool is full, the shortest queue.
            i = max(range(len(self._pools)), key=lambda k: self.capacities[k] - self._busy[k])
            self._busy[i] += 1
            return i

    def _giver(self, i: int) -> Any:
        def release() -> None:
            with self._lock:
                self._busy[i] -= 1

        return release

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        i = self._take()
        release = self._giver(i)
        try:
            response = self._pools[i].handle_request(request)
        except BaseException:
            release()
            raise
        assert isinstance(response.stream, httpx.SyncByteStream)  # what HTTPTransport returns
        # httpx's own client wraps a transport's response body the same way (BoundSyncStream).
        response.stream = _ReleasingStream(response.stream, release)
        return response

    def close(self) -> None:
        for pool in self._pools:
            pool.close()
