"""Shared HTTP connection pools for model endpoints.

Building an OpenAI client creates a new HTTP client with a fresh TLS context (~80 ms here), and a
new client also means new TCP connections. A runner that performs thousands of runs creates one
:class:`HttpClients` and passes it to every ``run(..., http=...)``: runs then reuse connections.
``httpx.Client`` is thread-safe, so worker threads may share it.

The pools also keep what is costly to build on top of them and safe to share between runs and
threads (:meth:`HttpClients.shared`): AutoGen's ``OpenAIWrapper`` for a profile costs ~4 ms of
CPU to build (it inspects the OpenAI client's signature 18 times), which was half of a run's own
CPU time when 50 runs were awaited together.

Each client's connections are split over a few pools (:class:`~stateflow.backends.
sharded_transport.ShardedTransport`): httpcore's pool does work per request that grows with its
connection count, 1.2 to 1.4 ms of CPU per call with 50 connections to one endpoint. When a proxy
is set in the environment, the client is httpx's own (one pool), so that it goes through the proxy
as before.
"""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import httpx

from stateflow.backends.sharded_transport import ShardedTransport

_T = TypeVar("_T")

__all__ = ["HttpClients"]


class HttpClients:
    """One ``httpx.Client`` per endpoint URL, created on first use; close() when done."""

    def __init__(self, *, max_connections: int = 64):
        self._max_connections = max_connections
        self._limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._clients: dict[str, httpx.Client] = {}
        self._shared: dict[Hashable, Any] = {}
        self._lock = threading.Lock()

    def get(self, base_url: str | None, timeout: float) -> httpx.Client:
        key = base_url or "https://api.openai.com/v1"
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                # The OpenAI client passes each request's own timeout; this is only the default.
                client = httpx.Client(timeout=httpx.Timeout(timeout), follow_redirects=True, **self._transport())
                self._clients[key] = client
            return client

    def _transport(self) -> dict[str, Any]:
        """The connection options of a new client: sharded pools, or httpx's own pool when the
        environment names a proxy (httpx reads proxies from it only for its own transport;
        ``urllib.request.getproxies`` is where httpx reads them)."""
        if urllib.request.getproxies():
            return {"limits": self._limits}
        return {"transport": ShardedTransport(max_connections=self._max_connections)}

    def shared(self, key: Hashable, build: Callable[[], _T]) -> _T:
        """The object ``build()`` made for ``key``, built on first use and then reused.

        Only for objects that are safe to use from several threads at once and whose ``key``
        names everything they were built from (e.g. a model client per profile and endpoint).
        """
        with self._lock:
            if key not in self._shared:
                self._shared[key] = build()
            return self._shared[key]

    def __getstate__(self) -> dict[str, int]:
        # Connections cannot cross processes: a copy sent to another process (a Ray worker)
        # starts with empty pools of the same size.
        return {"max_connections": self._max_connections}

    def __setstate__(self, state: dict[str, int]) -> None:
        self.__init__(max_connections=state["max_connections"])  # type: ignore[misc]

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
            self._shared = {}
        for c in clients:
            c.close()

    def __enter__(self) -> HttpClients:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
