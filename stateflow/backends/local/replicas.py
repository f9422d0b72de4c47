"""One pinned server per core: N servers of one model, requests routed by the episode's context.

Why: llama-cpp-python 0.3.x's server serves one request at a time (``llama_cpp.server.app``
takes a process-wide ``llama_outer_lock``/``llama_inner_lock`` pair around every completion, and
its ``Llama`` object decodes a single sequence: no parallel slots, no continuous batching). Two
workers against one server only overlap their environment and Python time with the other's
model time. Two servers, each pinned to its own core with one thread, evaluate two prompts at
once; each keeps its own prompt-state cache, so requests are routed by the episode's *context*
(the SQL database, the Bash file system): one context stays on one replica and finds its shared
prefix (system message, schema listing) cached there. Round-robin per request would split every
context's prefix across both caches.

Routing: the caller names the context of the work in flight with :func:`route_requests`
(the evaluation runner does it around every episode); the first endpoint resolved inside gives
that context a replica for good (sticky), the one with the fewest contexts in flight at that
moment, so two workers walking different databases land on different replicas. Requests outside
any route go to the least busy replica.

A replica that dies fails the request in flight like a single server does (the episode is
recorded with an error that names the replica, its core and the log tail); the next episode that
resolves it restarts it, on the same core.

>>> r = Router(2)
>>> r.acquire("db1"), r.acquire("db2"), r.acquire("db1")
(0, 1, 0)
>>> r.release("db1"); r.release("db1"); r.acquire("db3")
0
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from stateflow.backends.local.server import ManagedServer, ServerConfig
from stateflow.errors import ConfigError

__all__ = ["ReplicaSet", "Route", "Router", "current_route", "partition_cores", "route_requests"]


@dataclass
class Route:
    """The context a block of work belongs to (see :func:`route_requests`).

    Attributes:
        key: the context's name (a database, a file system); equal keys share a replica.
    """

    key: str
    _releases: list[Callable[[], None]] = field(default_factory=list, repr=False)
    _leased: set[int] = field(default_factory=set, repr=False)

    def lease(self, owner: object, release: Callable[[], None]) -> bool:
        """Record that ``owner`` counted this route in flight; ``False`` if it already did."""
        if id(owner) in self._leased:
            return False
        self._leased.add(id(owner))
        self._releases.append(release)
        return True


# A ContextVar, not shared state: each thread (and each asyncio task) sees the route it set.
_ROUTE: ContextVar[Route | None] = ContextVar("stateflow_local_route", default=None)


@contextmanager
def route_requests(key: str) -> Iterator[Route]:
    """Route the embedded-model endpoints resolved inside this block by ``key``.

    Args:
        key: the context of the work (e.g. the episode's database); blocks with equal keys are
            served by the same replica of a :class:`ReplicaSet`, so their shared prompt prefix
            stays in one prompt cache. Without replicas it changes nothing.

    Example:
        >>> with route_requests("concert_singer") as route:
        ...     current_route() is route
        True
        >>> current_route() is None
        True
    """
    route = Route(key)
    token = _ROUTE.set(route)
    try:
        yield route
    finally:
        _ROUTE.reset(token)
        for release in route._releases:
            release()


def current_route() -> Route | None:
    """The innermost :func:`route_requests` block of this thread/task, if any."""
    return _ROUTE.get()


class Router:
    """Sticky assignment of context keys to ``n`` replicas, least busy first (thread-safe).

    Args:
        n: number of replicas.
    """

    def __init__(self, n: int):
        self._n = n
        self._lock = threading.Lock()
        self._sticky: dict[str, int] = {}
        self._busy = [0] * n

    def acquire(self, key: str | None) -> int:
        """The replica of ``key`` (assigned now if new), counted busy until :meth:`release`."""
        with self._lock:
            idx = self._sticky.get(key) if key is not None else None
            if idx is None:
                idx = min(range(self._n), key=lambda i: (self._busy[i], i))
                if key is not None:
                    self._sticky[key] = idx
            self._busy[idx] += 1
            return idx

    def release(self, key: str | None, idx: int | None = None) -> None:
        """One block of ``key`` (or of replica ``idx`` for unrouted work) ended."""
        with self._lock:
            i = self._sticky[key] if key is not None else idx
            if i is not None and self._busy[i] > 0:
                self._busy[i] -= 1

    def peek(self, key: str | None) -> int:
        """The replica ``key`` would use now, without counting it busy."""
        with self._lock:
            idx = self._sticky.get(key) if key is not None else None
            return idx if idx is not None else min(range(self._n), key=lambda i: (self._busy[i], i))


def partition_cores(cores: Sequence[int], replicas: int) -> list[tuple[int, ...]]:
    """Split ``cores`` into ``replicas`` disjoint, nearly equal, contiguous groups.

    Raises:
        ConfigError: more replicas than cores (two replicas on one core only contend).

    >>> partition_cores([0, 1], 2)
    [(0,), (1,)]
    >>> partition_cores([0, 1, 2, 3, 4], 2)
    [(0, 1, 2), (3, 4)]
    """
    if replicas < 1:
        raise ConfigError(f"replicas must be >= 1, got {replicas}")
    if replicas > len(cores):
        raise ConfigError(
            f"replicas = {replicas} but this process may run on {len(cores)} core(s) "
            f"({', '.join(map(str, cores))}): one pinned server per core at most; use replicas <= {len(cores)}"
        )
    base, extra = divmod(len(cores), replicas)
    out, start = [], 0
    for r in range(replicas):
        size = base + (1 if r < extra else 0)
        out.append(tuple(cores[start : start + size]))
        start += size
    return out


class ReplicaSet:
    """``len(cpu_groups)`` servers of one model, each pinned to its cores with one thread per core.

    Behaves as one server to the pool (:class:`~stateflow.backends.local.pool.ServerHandle`):
    :meth:`ensure_running` and :meth:`check` act on the replica of the current route.

    Args:
        config: the settings every replica shares (``n_threads`` and ``cpus`` are set per replica).
        cpu_groups: the cores of each replica (see :func:`partition_cores`).
        make_server: builds one replica's server (tests pass a stand-in process).
    """

    def __init__(
        self,
        config: ServerConfig,
        cpu_groups: Sequence[tuple[int, ...]],
        make_server: Callable[[ServerConfig, str], Any] | None = None,
    ):
        from dataclasses import replace

        build = make_server or (lambda cfg, label: ManagedServer(cfg, label=label))
        n = len(cpu_groups)
        self.config = replace(config, n_threads=len(cpu_groups[0]), cpus=tuple(cpu_groups[0]))
        self.members = [
            build(
                replace(config, n_threads=len(cpus), cpus=tuple(cpus)),
                f"replica {i} of {n}, core{'s' if len(cpus) > 1 else ''} {','.join(map(str, cpus))}",
            )
            for i, cpus in enumerate(cpu_groups)
        ]
        self.router = Router(n)

    def __len__(self) -> int:
        return len(self.members)

    def member(self) -> Any:
        """The replica serving the current route (counted in flight for the route's lifetime)."""
        route = current_route()
        if route is None:
            return self.members[self.router.peek(None)]
        if route.lease(self, lambda: self.router.release(route.key)):
            return self.members[self.router.acquire(route.key)]
        return self.members[self.router.peek(route.key)]

    def ensure_running(self) -> str:
        """Start the current route's replica if needed (also after a crash); its base URL."""
        return self.member().ensure_running()

    def start_all(self) -> list[str]:
        """Start every replica (a runner does this before its first episode); their URLs."""
        return [m.ensure_running() for m in self.members]

    def check(self) -> None:
        """Raise ``ServerCrashedError`` if the current route's replica died (else any replica)."""
        route = current_route()
        if route is not None:
            self.members[self.router.peek(route.key)].check()
            return
        for m in self.members:
            m.check()

    def alive(self) -> bool:
        """Whether every replica's process runs."""
        return all(m.alive() for m in self.members)

    def stop(self) -> None:
        """Stop every replica (idempotent)."""
        for m in self.members:
            m.stop()

    def stats(self) -> dict[str, Any]:
        """The replicas' running totals, summed (numbers only)."""
        total: dict[str, Any] = {}
        for m in self.members:
            for k, v in m.stats().items():
                if isinstance(v, int | float) and not isinstance(v, bool):
                    total[k] = total.get(k, 0) + v
        return total

    @property
    def pids(self) -> list[int]:
        """The running replicas' process ids."""
        return [p for p in (m.pid for m in self.members) if p]
